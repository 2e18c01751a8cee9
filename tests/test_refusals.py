"""The words of gunicorn's refusals: the status, and a message that repeats nothing sent."""

import pytest
from gunicorn.http import errors

from plantstore.refusals import refusal


def test_a_framing_field_gunicorn_checks_by_name_is_named():
    status, message = refusal(errors.InvalidHeader("CONTENT-LENGTH"))
    assert (status, message) == (400, "The Content-Length header field is invalid or repeated.")


@pytest.mark.parametrize(
    "ex",
    [
        errors.InvalidHeader("Authorization Bearer s3cret"),
        errors.InvalidHeader("AUTHORIZATION"),
        errors.InvalidHeaderName("X-S3CRET("),
    ],
    ids=["a line without a colon", "another field's name", "a bad name"],
)
def test_any_other_header_field_is_not_named(ex):
    assert refusal(ex) == (
        400,
        "A header field is malformed: each must be 'Name: value' on one line.",
    )


def test_a_response_header_the_app_made_is_the_apps_error():
    assert refusal(errors.InvalidResponseHeader("'X-Bad'"))[0] == 500
    assert refusal(errors.InvalidResponseHeaderName("'X Bad'"))[0] == 500


def test_a_parse_error_without_words_of_its_own_is_400_and_anything_else_500():
    assert refusal(errors.InvalidProxyLine("PROXY s3cret")) == (400, "The request is malformed.")
    assert refusal(RuntimeError("s3cret")) == (500, "Internal Server Error")


def test_a_version_outside_http_1_is_505_and_one_that_is_none_400():
    """HTTP/1.2 to HTTP/1.9 are served as HTTP/1.1: only the major version is refused."""
    assert refusal(errors.InvalidHTTPVersion((2, 0))) == (
        505,
        "The request line must name HTTP/1.0 to HTTP/1.9: the server speaks HTTP/1.",
    )
    assert refusal(errors.InvalidHTTPVersion((0, 9)))[0] == 505
    assert refusal(errors.InvalidHTTPVersion("HTTP/s3cret")) == (
        400,
        "The request line does not end with an HTTP version, such as HTTP/1.1.",
    )
