from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


@login_required
def console(request: HttpRequest) -> HttpResponse:
    return render(request, "console/page.html", {})
