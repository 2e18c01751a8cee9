"""gunicorn's settings for `gunicorn -c gunicorn.conf.py` from the project's root.

They are the package's own, which `plantstore serve` runs from any directory: gunicorn takes
every setting and hook this module holds, imported ones too, so the two cannot differ.
"""

from plantstore.serving.settings import *  # noqa: F403
