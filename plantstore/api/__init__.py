"""The HTTP contract: resources, schemas, errors, authentication, the OpenAPI document, docs."""
