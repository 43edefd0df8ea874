"""``python -m data_prep.multistream IN OUT-multistream.xml.bz2``: recompress a
MediaWiki dump as a Wikimedia-style *multistream* bz2 (header stream, then one bz2
stream per ``--pages-per-stream`` pages, then the closing tag) with its
``OUT-multistream-index.txt.bz2`` (``offset:page_id:title`` lines).

Wikimedia publishes such dumps for the big wikis; this makes any dump (a single-
stream ``pages-articles.xml.bz2``, an export) splittable in the same way, so
``data_prep.build`` reads one huge file in parallel.
"""

from __future__ import annotations

import bz2
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from tacl_scale.cli import error_exit, make_parser
from tacl_scale.files import os_error_line, output_file_problem
from tacl_scale.preemption import ctrl_c_ends, uninterrupted

from .inputs import InputError, index_beside, open_decompressed, read_errors

_PAGE_END = b"</page>"
_TITLE = re.compile(rb"<title>(.*?)</title>", re.DOTALL)
_ID = re.compile(rb"<id>(\d+)</id>")


def iter_raw_pages(path: str) -> Iterator[bytes]:
    """The dump's header (everything before the first ``<page>``) and then each
    ``<page>…</page>`` verbatim, streaming; :class:`InputError` naming ``path`` when
    it cannot be read or its compressed data is corrupt or cut short."""
    buffer = b""
    header_done = False
    with read_errors(path), open_decompressed(path) as f:
        while True:
            data = f.read(1 << 20)
            buffer += data
            if not header_done:
                start = buffer.find(b"<page>")
                if start < 0 and data:
                    continue
                if start < 0:
                    raise InputError(f"{path}: no <page> element")
                # Keep the indentation before <page> with the page.
                line_start = buffer.rfind(b"\n", 0, start) + 1
                yield buffer[:line_start]
                buffer = buffer[line_start:]
                header_done = True
            while True:
                end = buffer.find(_PAGE_END)
                if end < 0:
                    break
                end += len(_PAGE_END)
                if buffer[end : end + 1] == b"\n":
                    end += 1
                yield buffer[:end]
                buffer = buffer[end:]
            if not data:
                break
    if not header_done:
        raise InputError(f"{path}: no <page> element")
    if b"<page>" in buffer:
        raise InputError(f"{path}: truncated: a <page> is not closed")


def write_multistream(source: str, target: str, pages_per_stream: int = 100) -> tuple[Path, Path]:
    """Write ``target`` (must end in ``-multistream.xml.bz2``) and its index beside
    it; return both paths. Both are written beside their names and renamed at the
    end, so a source found truncated halfway leaves files already there as they were."""
    index = Path(index_beside(target))  # raises ValueError for a target not named as a multistream dump
    if pages_per_stream < 1:
        raise ValueError(f"--pages-per-stream must be at least 1, not {pages_per_stream}")
    if not os.path.isfile(source):  # before the target's directory is made
        raise InputError(f"{source}: {'a directory, not a dump' if os.path.isdir(source) else 'no such file'}")
    dump_path = Path(target)
    partial = {path: path.with_name(f".{path.name}.tmp") for path in (dump_path, index)}
    dump_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        _write(source, partial[dump_path], partial[index], pages_per_stream)
        with uninterrupted():  # a new dump beside an old index: the build would read it at the old offsets
            os.replace(partial[dump_path], dump_path)
            try:
                os.replace(partial[index], index)
            except OSError:
                index.unlink(missing_ok=True)  # the dump read whole, as one unit, rather than at the old offsets
                raise
    finally:
        for tmp in partial.values():
            tmp.unlink(missing_ok=True)
    return dump_path, index


def _write(source: str, target: Path, index: Path, pages_per_stream: int) -> None:
    pages = iter_raw_pages(source)
    header = next(pages)
    index_lines: list[str] = []
    with open(target, "wb") as out:
        out.write(bz2.compress(header))
        group: list[bytes] = []

        def flush() -> None:
            if not group:
                return
            offset = out.tell()
            for page in group:
                title = _TITLE.search(page)
                page_id = _ID.search(page)
                index_lines.append(
                    f"{offset}:{page_id.group(1).decode() if page_id else 0}:"
                    f"{title.group(1).decode('utf-8', 'replace') if title else ''}"
                )
            out.write(bz2.compress(b"".join(group)))
            group.clear()

        for page in pages:
            group.append(page)
            if len(group) >= pages_per_stream:
                flush()
        flush()
        out.write(bz2.compress(b"</mediawiki>\n"))
    with bz2.open(index, "wt", encoding="utf-8") as f:
        f.write("\n".join(index_lines) + "\n")


@ctrl_c_ends
def main(argv: list[str] | None = None) -> int:
    p = make_parser("python -m data_prep.multistream", __doc__)
    p.add_argument("source", help="MediaWiki dump (.xml, .xml.bz2, .xml.gz)")
    p.add_argument("target", help="output, NAME-multistream.xml.bz2")
    p.add_argument("--pages-per-stream", type=int, default=100, help="pages in each bz2 stream (as Wikimedia's dumps)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the target and its index if they exist (else refused)")
    args = p.parse_args(argv)
    try:
        outputs = (args.target, index_beside(args.target))
    except ValueError as err:
        return error_exit(str(err))
    for path in outputs:
        if problem := output_file_problem(path, args.overwrite):
            return error_exit(problem)
    try:
        dump, index = write_multistream(args.source, args.target, args.pages_per_stream)
    except (InputError, ValueError) as err:
        return error_exit(str(err))
    except OSError as err:
        return error_exit(os_error_line(err, args.target))
    print(f"wrote {dump} and {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
