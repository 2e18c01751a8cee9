"""Operating the service: metrics, logs, health and readiness."""
