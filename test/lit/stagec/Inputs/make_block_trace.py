"""Writes a trace of JSON lines as Mooncake publishes them: REQUESTS
requests GAP_MS apart, request i's prompt document i mod DOCUMENTS (BLOCKS
blocks of 512 tokens, the same ids each time) and then a question of its
own (300 tokens, one id of its own), 20 output tokens. GAP_MS `none`:
no timestamps, the lengths and blocks alone."""

import json
import sys


def main():
    path, requests, documents, blocks, gap_ms = sys.argv[1:6]
    requests, documents, blocks = int(requests), int(documents), int(blocks)
    with open(path, "w") as out:
        for i in range(requests):
            document = i % documents
            ids = [document * blocks + b for b in range(blocks)]
            ids.append(documents * blocks + i)
            line = {"input_length": blocks * 512 + 300, "output_length": 20,
                    "hash_ids": ids}
            if gap_ms != "none":
                line["timestamp"] = i * float(gap_ms)
            out.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
