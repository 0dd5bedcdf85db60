"""The REST face (``/api/v1``) and its OpenAPI contract (``/openapi.json``)."""
