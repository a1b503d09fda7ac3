"""Headless Chromium for end-to-end tests: the DOM after the page's script ran, or a screenshot.

`--dump-dom` prints the document as the browser has it once loading is done; with a virtual time
budget, pending timers and fetches (the GPU map's first refresh) run before it is printed. The
printed HTML is read back into a small element tree (`parse`), enough to find elements by their
attributes and read their text.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})


async def _chromium(binary: str, url: str, *flags: str, timeout: float = 120.0) -> bytes:
    with tempfile.TemporaryDirectory(prefix="tessera-chromium-") as profile:
        proc = await asyncio.create_subprocess_exec(
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--no-proxy-server", "--hide-scrollbars", f"--user-data-dir={profile}", "--virtual-time-budget=5000",
            *flags, url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
    if proc.returncode != 0:
        raise AssertionError(f"chromium exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    return out


async def dump_dom(binary: str, url: str) -> Element:
    """The document after its script ran, as an element tree."""
    return parse((await _chromium(binary, url, "--dump-dom")).decode())


async def screenshot(binary: str, url: str, path: Path, size: str = "1200,900") -> None:
    await _chromium(binary, url, f"--screenshot={path}", f"--window-size={size}")


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    parts: list[str | Element] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(part if isinstance(part, str) else part.text for part in self.parts)

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Element]:
        """Elements (this one included) with the tag and exactly these attribute values
        (`data_node="x"` means `data-node="x"`)."""
        wanted = {key.replace("_", "-"): value for key, value in attrs.items()}
        return [el for el in self.iter() if (tag is None or el.tag == tag)
                and all(el.attrs.get(key) == value for key, value in wanted.items())]

    def find(self, tag: str | None = None, **attrs: str) -> Element:
        found = self.find_all(tag, **attrs)
        if not found:
            raise AssertionError(f"no <{tag or '*'}> with {attrs}")
        return found[0]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {key: value or "" for key, value in attrs})
        parent = self.stack[-1]
        parent.children.append(element)
        parent.parts.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):  # close up to the matching open element
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].parts.append(data)


def parse(html: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def table_rows(section: Element) -> list[list[str]]:
    """The body rows of the first table in `section`, as cell texts."""
    body = section.find("tbody")
    return [[cell.text for cell in row.find_all("td")] for row in body.find_all("tr")]
