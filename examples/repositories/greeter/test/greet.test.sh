#!/bin/sh
# The test the eval grades with (spec.verify): greet the name given, and the world by default.
got=$(sh src/greet.sh Ada)
[ "$got" = "Hello, Ada" ] || { echo "FAIL: sh src/greet.sh Ada printed '$got', want 'Hello, Ada'"; exit 1; }
got=$(sh src/greet.sh)
[ "$got" = "Hello, world" ] || { echo "FAIL: sh src/greet.sh printed '$got', want 'Hello, world'"; exit 1; }
echo "ok: 2 checks passed"
