"""A bearer token's life, a module a step; what a token may be is `plantstore.config`'s.

1. Made: `plantstore token` prints a fresh one (`fresh.new`) and the line of the tokens file
   that accepts it (`file.line_for`); a run with no token configured writes one into a file
   of its own (`fresh.make`, in gunicorn's `when_ready`).
2. Stored: a line of `PLANTSTORE_TOKENS_FILE` holds its SHA-256 digest, a name and its scopes
   (`file`); `PLANTSTORE_TOKENS` may list tokens too, which the configuration reads.
3. Read, and kept last good: each worker reads the file again when it changes (`accepted`); a
   bad file is not taken, and the run's last good copy of it is served (`last_good`).
4. Looked up per request: `plantstore.api.auth.BearerAuth` reads the `Authorization` header,
   finds the token by its digest (`accepted.Tokens.find`) and checks the operation's scope.
5. Named in the log: `BearerAuth` leaves the token's name, never the token, for the access
   log (`plantstore.api.auth.TOKEN_KEY`, plantstore/operations/logs.py).
"""
