"""The local control API: FastAPI routes over a ``NodeApi`` (never ``NodeService`` itself).

Every ``/v1`` route needs the bearer token from ``<data dir>/api.token`` (or a
dashboard session); ``/metrics``, ``/openapi.json`` and the dashboard's login and
static files are public. Every body and query is a pydantic model
(``node.api.models``); errors are mapped by type (``node.api.errors``); the
hostile-input doors sit in front, in ``node.api.guards``. ``build_app`` returns
that guard wrapped round the FastAPI app; hypercorn's trio worker serves it.
The routes themselves live one module per face of the node (this package's face says the rule).
"""

from __future__ import annotations

from fastapi import FastAPI

from node.api.auth import ApiAuth
from node.api.dashboard import dashboard_router
from node.api.errors import install_error_handlers
from node.api.guards import Guard
from node.api.interface import NodeApi
from node.api.metrics import metrics_router
from node.api.routes.learning import learning_router
from node.api.routes.market import market_router
from node.api.routes.memory import memory_router
from node.api.routes.operator import operator_router
from node.api.routes.status import status_router
from node.api.routes.trust import trust_router
from node.api.routes.weather import weather_router
from node.api.routes.working import working_memory_router


def build_fastapi(node: NodeApi | None, auth: ApiAuth) -> FastAPI:
    """The FastAPI app without the guard (``node`` None: only dashboard and metrics)."""
    app = FastAPI(title="crystalmesh local API", version="1", docs_url=None, redoc_url=None,
                  swagger_ui_oauth2_redirect_url=None)
    app.state.auth = auth
    install_error_handlers(app)
    if node is not None:
        for router in (status_router, memory_router, working_memory_router, learning_router, market_router,
                       trust_router, weather_router, operator_router):
            app.include_router(router(node))
    app.include_router(dashboard_router())
    app.include_router(metrics_router(node))
    return app


class ApiApp(Guard):
    """What hypercorn serves: the guard in front of the FastAPI app."""

    def __init__(self, node: NodeApi | None, token: str) -> None:
        self.auth = ApiAuth(token)
        self.fastapi = build_fastapi(node, self.auth)
        super().__init__(self.fastapi)


def build_app(node: NodeApi, token: str) -> ApiApp:
    return ApiApp(node, token)
