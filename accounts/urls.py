"""Dashboard routes under ``/dashboard/`` (accounts D1), namespace ``dashboard``."""

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from accounts.login_throttle import ThrottledDashboardAuthenticationForm
from accounts.views import alerts, dashboard, keys

app_name = "dashboard"
TEMPLATES = "accounts/dashboard/"

urlpatterns = [
    path("", dashboard.index, name="index"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name=TEMPLATES + "login.html",
            redirect_authenticated_user=True,
            authentication_form=ThrottledDashboardAuthenticationForm,
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "password-reset/",
        auth_views.PasswordResetView.as_view(
            template_name=TEMPLATES + "password_reset.html",
            email_template_name=TEMPLATES + "password_reset_email.txt",
            subject_template_name=TEMPLATES + "password_reset_subject.txt",
            success_url=reverse_lazy("dashboard:password_reset_done"),
        ),
        name="password_reset",
    ),
    path(
        "password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(
            template_name=TEMPLATES + "password_reset_done.html"
        ),
        name="password_reset_done",
    ),
    path(
        "reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(
            template_name=TEMPLATES + "password_reset_confirm.html",
            success_url=reverse_lazy("dashboard:password_reset_complete"),
        ),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/",
        auth_views.PasswordResetCompleteView.as_view(
            template_name=TEMPLATES + "password_reset_complete.html"
        ),
        name="password_reset_complete",
    ),
    path("all/", dashboard.global_usage, name="all"),
    path("all/usage.csv", dashboard.global_usage_csv, name="all_csv"),
    path("all/recompute/", dashboard.recompute, name="recompute"),
    path("<slug:slug>/usage/", dashboard.usage, name="usage"),
    path("<slug:slug>/usage.csv", dashboard.usage_csv, name="usage_csv"),
    path("<slug:slug>/requests/", dashboard.requests_view, name="requests"),
    path("<slug:slug>/keys/", keys.keys, name="keys"),
    path("<slug:slug>/keys/<uuid:key_id>/", keys.key_edit, name="key_edit"),
    path("<slug:slug>/keys/<uuid:key_id>/revoke/", keys.key_revoke, name="key_revoke"),
    path("<slug:slug>/alerts/", alerts.alerts, name="alerts"),
    path(
        "<slug:slug>/alerts/secret/", alerts.rotate_secret, name="alerts_rotate_secret"
    ),
    path("<slug:slug>/alerts/test/", alerts.send_test, name="alerts_send_test"),
]
