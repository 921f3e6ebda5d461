"""NeuRules REST service: FastAPI API, persistence, auth and operations."""
