"""API tokens in the admin: issued here (or by `manage.py createtoken`), the secret shown once.

The add form takes what createtoken takes (name, scope, limits) and issues the token through
the same engine.ledger.tokens.issue_token, which stores only its SHA-256. The page after saving is
rendered in that same response and shows the secret once; it is never put in the messages
framework (which keeps unread messages in a cookie or the session) nor anywhere else.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from engine.ledger.tokens import SCOPE_DEFAULT, ScopeDefault, delete_tokens, issue_token, revoke_tokens, set_limits
from engine.models import ApiToken
from engine.states import Priority

ISSUED = "_issued_token"  # the request attribute carrying the secret from save_model to response_add


class TokenAddForm(forms.ModelForm):
    # Not the model's field names: the form's values ("the scope's default") are not column values.
    priority_cap = forms.TypedChoiceField(
        choices=[("", "the scope's default (normal for a client, critical for an operator)"), *Priority.choices],
        coerce=int, empty_value=None, required=False,
        label="Max priority", help_text="The highest priority the token may ask for.")
    active_cap = forms.CharField(
        required=False, label="Max active jobs",
        help_text="Queued plus running jobs at once: a number, 'none' for no cap, or empty for the scope's "
                  "default (64 for a client, no cap for an operator).")

    class Meta:
        model = ApiToken
        fields = ("name", "scope")

    def clean_active_cap(self) -> int | None | ScopeDefault:
        text = (self.cleaned_data.get("active_cap") or "").strip().lower()
        if not text:
            return SCOPE_DEFAULT
        if text in {"none", "unlimited"}:
            return None
        if not text.isdigit() or int(text) < 1:
            raise forms.ValidationError("a number of at least 1, 'none', or empty")
        return int(text)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "scope", "max_priority", "max_active_jobs", "prefix", "created_at", "last_used_at",
                    "revoked_at")
    list_filter = ("scope",)
    # The limits are the admin's to change (max_active_jobs empty is no cap); the secret is not.
    list_editable = ("max_priority", "max_active_jobs")
    readonly_fields = ("prefix", "token_hash", "created_at", "last_used_at")
    actions = ["revoke"]

    def get_form(self, request: HttpRequest, obj: ApiToken | None = None, change: bool = False,
                 **kwargs: Any) -> type[forms.ModelForm]:
        if obj is None:
            kwargs["form"] = TokenAddForm
            kwargs["fields"] = ("name", "scope", "priority_cap", "active_cap")
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        if obj is None:
            return ("name", "scope", "priority_cap", "active_cap")
        return super().get_fields(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        return () if obj is None else self.readonly_fields

    def save_model(self, request: HttpRequest, obj: ApiToken, form: forms.ModelForm, change: bool) -> None:
        if change:
            set_limits(obj)
            return
        data = form.cleaned_data
        record, token = issue_token(data["name"], data["scope"], max_priority=data["priority_cap"],
                                    max_active_jobs=data["active_cap"])
        for field in ApiToken._meta.concrete_fields:  # the admin goes on with the row issue_token made
            setattr(obj, field.attname, getattr(record, field.attname))
        obj._state.adding = False
        setattr(request, ISSUED, token)

    def response_add(self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None) -> HttpResponse:
        token = getattr(request, ISSUED, None)
        if token is None:
            return super().response_add(request, obj, post_url_continue)
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "title": f"Token issued for {obj.name}",
            "opts": opts,
            "record": obj,
            "token": token,
            "has_view_permission": True,
        }
        response = TemplateResponse(request, "admin/engine/apitoken/issued.html", context)
        response["Cache-Control"] = "no-store"  # the one page that holds the secret is never kept
        return response

    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        delete_tokens(ApiToken.objects.filter(pk=obj.pk))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        delete_tokens(queryset)

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = revoke_tokens(queryset)
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
