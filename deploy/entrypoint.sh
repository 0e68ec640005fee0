#!/bin/sh
# The container's entrypoint (Dockerfile; docs/deploy.md).
#
#   (no arguments) | serve [FLAGS]   ostinato serve, on the host and port the image sets
#   --FLAG ...                       the same, with those flags
#   migrate [FLAGS]                  bring the database to this version's schema, then exit
#   anything else                    run that command (ostinato chat, a shell, ...)
#
# exec replaces this shell, so ostinato is PID 1's process and receives SIGTERM itself:
# it stops taking turns, drains, and exits within server.shutdown_grace_s.
set -eu

if [ "$#" -eq 0 ]; then
    set -- serve
fi

case "$1" in
    serve | migrate | check-config | keys | replay)
        exec ostinato "$@"
        ;;
    -*)
        exec ostinato serve "$@"
        ;;
    *)
        exec "$@"
        ;;
esac
