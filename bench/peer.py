"""The peer: `POST /plants` as FastAPI serves it, pydantic validating the same contract.

It is what people pick for speed in Python (an ASGI app under uvicorn with uvloop and
httptools), written the way FastAPI's documentation shows, so that the service's creates can be
measured against it (`bench.loopback`): a bearer token required, a `NewPlant` body whose `id`
is a strict int64 and whose other fields but `name` and `tag` are ignored, the `Plant` answered
(200, and 200 again to an identical repeat), 409 for other content under a taken id, and every
failure the `Error` body, a validation failure 400 as the service answers it (not FastAPI's
422). Plants are kept in a dict: one worker, one event loop, no lock needed. uvicorn serves
`bench.peer:app` (`bench.server.Peer`).
"""

import secrets
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field, StrictInt, StrictStr
from starlette.exceptions import HTTPException as StarletteHTTPException

from bench.environs import TOKEN
from plantstore.api.schemas import INT64_MAX, INT64_MIN


class Plant(BaseModel):
    name: StrictStr
    tag: StrictStr | None = None


class NewPlant(Plant):
    id: Annotated[StrictInt, Field(ge=INT64_MIN, le=INT64_MAX)]


bearer = HTTPBearer()


async def authorized(credentials: Annotated[HTTPAuthorizationCredentials, Depends(bearer)]) -> None:
    """Let only the bench's token through; `HTTPBearer` answers 401 to a request without one."""
    if not secrets.compare_digest(credentials.credentials.encode(), TOKEN.encode()):
        raise HTTPException(
            401, "The bearer token is not accepted.", {"WWW-Authenticate": "Bearer"}
        )


def create_peer_app() -> FastAPI:
    """The peer, with a store of its own."""
    app = FastAPI(dependencies=[Depends(authorized)])
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    plants: dict[int, Plant] = {}

    @app.post("/plants", response_model_exclude_none=True)
    async def add_plant(new_plant: NewPlant) -> Plant:
        """Keep a new plant; an identical repeat answers the same, a different one 409."""
        plant = Plant(name=new_plant.name, tag=new_plant.tag)
        kept = plants.setdefault(new_plant.id, plant)
        if kept != plant:
            raise HTTPException(409, f"Plant {new_plant.id} already exists with other content.")
        return kept

    return app


async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    return JSONResponse(
        {"error": error.status_code, "message": error.detail},
        error.status_code,
        error.headers,
    )


async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    """Answer 400 naming each wrong field and why, as the service does."""
    message = "; ".join(
        f"{'.'.join(map(str, problem['loc'][1:])) or 'body'}: {problem['msg']}"
        for problem in error.errors()
    )
    return JSONResponse({"error": 400, "message": message}, 400)


app = create_peer_app()
