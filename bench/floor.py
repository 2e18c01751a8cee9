"""The floor: a bare Falcon app whose `on_post` answers constant JSON, with no middleware.

Nothing can answer `POST /plants` through Falcon for less, so the app is measured against it.
gunicorn serves it as `bench.floor:app`.
"""

import falcon

PLANT = b'{"name":"plant","tag":"tree"}'


class ConstantPlant:
    def on_post(self, req, resp):
        resp.data = PLANT


def create_floor_app() -> falcon.App:
    app = falcon.App()
    app.add_route("/plants", ConstantPlant())
    return app


app = create_floor_app()
