"""Reads the text of one PDF, in a child process of its own (``ostinato.bounded.pdf``).

Run as a script (``python -I pdf_worker.py MEMORY_BYTES``), the PDF on standard input:
it limits its own address space to MEMORY_BYTES, extracts each page's text with pypdf
until ``CHARS`` characters are read, and writes one JSON object to standard output:
``{"pages": [...]}``, or ``{"error": "..."}`` when the PDF cannot be read. It imports
nothing of ostinato, so it starts with nothing of the server's (no keys, no config).
"""

import json
import resource
import sys

CHARS = 400_000  # read no further than this (the caller keeps fewer)


def main() -> None:
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    data = sys.stdin.buffer.read()
    try:
        import io

        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(data))
        pages: list[str] = []
        read = 0
        for page in reader.pages:
            text = page.extract_text() or ""
            pages.append(text)
            read += len(text)
            if read >= CHARS:
                break
    except MemoryError:
        answer: dict[str, object] = {"error": "reading it needed more memory than allowed"}
    except Exception as exc:  # whatever the PDF does to the parser is the PDF's fault
        answer = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    else:
        answer = {"pages": pages}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
