"""The floor: a bare Falcon app whose `on_post` reads the body and answers constant JSON.

Nothing can answer `POST /plants` through Falcon for less, so the app is measured against it.
gunicorn serves it as `bench.floor:app`. It reads the body as any app that takes one must:
plantstore's gunicorn worker closes the connection after an answer that left a body unread.
"""

import falcon

PLANT = b'{"name":"plant","tag":"tree"}'


class ConstantPlant:
    def on_post(self, req, resp):
        req.bounded_stream.read()
        resp.data = PLANT


def create_floor_app() -> falcon.App:
    app = falcon.App()
    app.add_route("/plants", ConstantPlant())
    return app


app = create_floor_app()
