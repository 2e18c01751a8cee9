"""What gunicorn refuses before the app runs: the status and the message, in the service's words.

gunicorn's own messages quote what the client sent (a header line, the request line, a
`Transfer-Encoding`, an `Expect`), and a header may hold a token. These messages never do, so
neither the answer nor the error log repeats it: they name a header field only when it is one
of the few whose rules gunicorn checks by name.
"""

from gunicorn.http import errors

#: The header fields whose framing rules gunicorn checks, by the name it reports them with.
_CHECKED_FIELDS = {
    "CONTENT-LENGTH": "Content-Length",
    "TRANSFER-ENCODING": "Transfer-Encoding",
    "HOST": "Host",
    "CONTENT-TYPE": "Content-Type",
}


def refusal(ex: Exception) -> tuple[int, str]:
    """The status and message answering `ex`, raised while gunicorn read a request.

    A `ParseException` is the client's error; anything else is a bug (500). A response header
    the app made is refused by gunicorn with the request header's exception classes: that one
    is the app's error, so it is matched first.
    """
    match ex:
        case errors.InvalidResponseHeader() | errors.InvalidResponseHeaderName():
            return 500, "Internal Server Error"
        case errors.InvalidRequestLine():
            return 400, "The request line is not of the form 'METHOD /path HTTP/1.1'."
        case errors.InvalidRequestMethod():
            return 400, "The method is not a valid HTTP method."
        case errors.InvalidHTTPVersion(version=tuple()):
            # A version gunicorn could read, outside HTTP/1 (RFC 9110, section 15.6.6).
            return 505, "The request line must name HTTP/1.0 to HTTP/1.9: the server speaks HTTP/1."
        case errors.InvalidHTTPVersion():
            return 400, "The request line does not end with an HTTP version, such as HTTP/1.1."
        case errors.InvalidHeader(hdr=str(name)) if name in _CHECKED_FIELDS:
            return 400, f"The {_CHECKED_FIELDS[name]} header field is invalid or repeated."
        case errors.InvalidHeader() | errors.InvalidHeaderName():
            return 400, "A header field is malformed: each must be 'Name: value' on one line."
        case errors.ObsoleteFolding():
            return 400, "A header field is folded over several lines, which HTTP/1.1 forbids."
        case errors.UnsupportedTransferCoding():
            return 501, "The only Transfer-Encoding accepted is chunked."
        case errors.LimitRequestLine():
            return 414, "The request line is longer than the server accepts."
        case errors.LimitRequestHeaders():
            return 431, "The header fields are more, or longer, than the server accepts."
        case errors.ExpectationFailed():
            return 417, "The only expectation the server meets is 'Expect: 100-continue'."
        case errors.ConfigurationProblem():
            # gunicorn raises it for one thing only: a path outside the prefix that a trusted
            # proxy sent as SCRIPT_NAME. A client asked for it; the server is fine.
            return 400, "The path does not start with the SCRIPT_NAME prefix."
        case errors.InvalidSchemeHeaders():
            return 400, "The forwarded scheme headers contradict each other."
        case errors.ParseException():
            return 400, "The request is malformed."
    return 500, "Internal Server Error"
