"""ASGI entry point: HTTP through Django, with /events/ served by the SSE consumer.

Outermost, unchanged-job polls are answered 304 on their own thread (engine/api/poll.py);
everything else meets admission control (provingsite/admission.py) before Django."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "provingsite.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from engine.api.poll import ConditionalPolls  # noqa: E402
from provingsite.admission import admitted  # noqa: E402
from provingsite.routing import http_routes  # noqa: E402
from provingsite.static import StaticFiles  # noqa: E402

application = ConditionalPolls(admitted(ProtocolTypeRouter({"http": StaticFiles(URLRouter(http_routes(django_app)))})))
