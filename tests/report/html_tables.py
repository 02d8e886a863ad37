"""Read the report's HTML as a browser's parser would: tables as rows of cell texts."""

from __future__ import annotations

from html.parser import HTMLParser


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict[str, str | None]]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.row_attrs: dict[str, list[dict[str, str | None]]] = {}
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.links: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._script: list[str] | None = None
        self._script_attrs: dict[str, str | None] = {}

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        attributes = dict(attrs)
        if tag == "table" and attributes.get("id"):
            self._table = attributes["id"]
            self.tables[self._table] = []
            self.row_attrs[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
            self.row_attrs[self._table].append(attributes)
        elif tag in ("td", "th") and self._table:
            self._cell = []
        elif tag == "script":
            self._script, self._script_attrs = [], attributes
        elif tag == "a" and attributes.get("href"):
            self.links.append(attributes["href"] or "")

    def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
        if tag in ("td", "th") and self._table and self._cell is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "script" and self._script is not None:
            self.scripts.append((self._script_attrs, "".join(self._script)))
            self._script = None

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        if self._script is not None:
            self._script.append(data)
        elif self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> _Collector:
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return collector


def rows(html: str, table_id: str) -> list[list[str]]:
    """The body rows (header row dropped) of the table with ``id=table_id``."""
    return parse(html).tables[table_id][1:]
