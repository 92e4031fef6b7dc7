"""The REST API for clients, mounted at /api/v1/ (OpenAPI at /api/v1/openapi.json, docs at
/api/v1/docs). django-ninja: typed schemas and the OpenAPI document come from one source, so
what the fuzzer and clients read is what the code checks."""

from __future__ import annotations

from ninja import NinjaAPI

from engine.api import errors
from engine.api.auth import TokenAuth
from engine.api.capacity import router as capacity_router
from engine.api.circuits import router as circuits_router
from engine.api.jobs import router as jobs_router
from engine.api.key_control import router as key_control_router
from engine.api.kinds import router as kinds_router
from engine.api.moments import MomentRenderer
from engine.api.stats import router as stats_router
from engine.api.verification_keys import router as keys_router

api = NinjaAPI(
    title="provingsite",
    version="1",
    description="Submit Groth16 proof requests, follow them, download the proofs.",
    auth=TokenAuth(),
    urls_namespace="api-v1",
    openapi_url="/openapi.json",
    docs_url="/docs",
    renderer=MomentRenderer(),
)
errors.install(api)
api.add_router("/", jobs_router)
api.add_router("/", circuits_router)
api.add_router("/", keys_router)
api.add_router("/", kinds_router)
api.add_router("/", stats_router)
api.add_router("/", capacity_router)
api.add_router("/", key_control_router)
