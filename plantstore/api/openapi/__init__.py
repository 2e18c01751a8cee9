"""The OpenAPI 3.1.0 document, generated from the marshmallow schemas so the two cannot drift,
and from what each resource's responders say of themselves (`@Operation`), beside them."""
