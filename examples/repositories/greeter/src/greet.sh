#!/bin/sh
# Prints a greeting.
echo "Hello"
