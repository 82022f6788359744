"""The HTTP service: the FastAPI app of ``netd run`` (/metrics, health, the v1 JSON API, the
scheduler extender), bearer-token auth, RFC 9457 problem documents, the listener both services
use (``server``), the client the commands use to reach a running daemon (``client``) and the
progress line of their long runs (``progress``).
Features mount their own ``routes.py`` routers.
"""

from netd import public_face

__all__, __getattr__, __dir__ = public_face(
    __name__,
    {
        "app": ("create_app",),
        "auth": ("load_token", "token_guard"),
        "client": ("daemon_get", "daemon_post", "daemon_url"),
        "progress": ("Progress", "add_progress_flag"),
        "server": ("SWITCH_INTERVAL_S", "Server", "bind", "share_interpreter_lock"),
        "service_view": ("ClusterSnapshot", "HostView", "ServiceView"),
        "problems": ("PROBLEM_JSON", "Problem", "install_problem_handlers", "problem_response"),
    },
)
