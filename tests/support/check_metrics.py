"""Parses a Prometheus text exposition from stdin with the reference parser
(prometheus_client) and prints its families as JSON for the Rust test to check.

`make test` installs prometheus-client into the target dir when python3 lacks it
(scripts/test-deps.sh).
"""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    text = sys.stdin.read()
    out = {}
    # Raises on anything the reference parser rejects; the exit code says so.
    for fam in text_string_to_metric_families(text):
        out[fam.name] = {
            "type": fam.type,
            "help": fam.documentation,
            "samples": [
                {"name": s.name, "labels": s.labels, "value": s.value}
                for s in fam.samples
            ],
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
