#!/bin/sh
# Starts the Python echo server; PYTHON comes from the server's `env` in the configuration.
exec "$PYTHON" "$(dirname "$0")/echo_server.py" "$@"
