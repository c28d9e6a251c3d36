"""`parser.requisites`: what a browser loads to show a page, from its HTML and its stylesheets."""

from __future__ import annotations

from lxml import etree
from parsel.selector import create_root_node

from parser.requisites import MAX_REQUISITES, css_requisites, html_requisites, srcset_urls

BASE = "https://example.com/blog/post"


def requisites(html: str) -> list[str]:
    return html_requisites(create_root_node(html, etree.HTMLParser), BASE)


def test_every_kind_of_embed_in_document_order() -> None:
    html = """<html><head>
      <link rel="stylesheet" href="/css/site.css">
      <link rel="Shortcut Icon" href="/favicon.ico">
      <link rel="alternate" href="/feed.xml">
      <link rel="preload" href="/fonts/a.woff2" as="font">
      <script src="app.js"></script>
      <style>@import "print.css"; body { background: url(/img/bg.png) }</style>
    </head><body background="/img/body.gif">
      <img src="/img/a.png" srcset="/img/a-2x.png 2x, /img/a-3x.png 3x">
      <picture><source srcset="/img/b.webp" type="image/webp"></picture>
      <video src="/v.mp4" poster="/v.jpg"><track src="/v.vtt"></video>
      <audio><source src="/a.ogg"></audio>
      <embed src="/e.swf"><object data="/o.svg"></object>
      <iframe src="https://player.example.net/1"></iframe>
      <input type="image" src="/go.png"><input type="text" src="/not.png">
      <div style="background-image: url('/img/div.jpg')"></div>
      <a href="/next">a link is not a requisite</a>
    </body></html>"""
    assert requisites(html) == [
        "https://example.com/css/site.css",
        "https://example.com/favicon.ico",
        "https://example.com/fonts/a.woff2",
        "https://example.com/blog/app.js",
        "https://example.com/blog/print.css",
        "https://example.com/img/bg.png",
        "https://example.com/img/body.gif",
        "https://example.com/img/a.png",
        "https://example.com/img/a-2x.png",
        "https://example.com/img/a-3x.png",
        "https://example.com/img/b.webp",
        "https://example.com/v.mp4",
        "https://example.com/v.jpg",
        "https://example.com/v.vtt",
        "https://example.com/a.ogg",
        "https://example.com/e.swf",
        "https://example.com/o.svg",
        "https://player.example.net/1",
        "https://example.com/go.png",
        "https://example.com/img/div.jpg",
    ]


def test_data_and_script_urls_fragments_and_repeats_are_no_requisites() -> None:
    html = """<img src="data:image/png;base64,AAAA"><img src="javascript:void(0)">
      <img src="#top"><img src=""><img src="/x.png"><img src="/x.png#again">
      <script src="blob:https://example.com/1"></script>"""
    assert requisites(html) == ["https://example.com/x.png"]


def test_a_page_names_at_most_the_cap() -> None:
    html = "".join(f'<img src="/i/{n}.png">' for n in range(MAX_REQUISITES + 5))
    assert len(requisites(html)) == MAX_REQUISITES


def test_srcset_reads_as_html_does() -> None:
    assert srcset_urls("a.png 1x, b.png 2x") == ["a.png", "b.png"]
    assert srcset_urls(" a.png, b.png 2x ,  c.png") == ["a.png", "b.png", "c.png"]
    assert srcset_urls("a.png,b.png 2x") == ["a.png,b.png"]  # a URL runs to whitespace
    assert srcset_urls("image,with,commas.png 100w, d.png 200w") == [
        "image,with,commas.png",
        "d.png",
    ]
    assert srcset_urls("e.png (max-width: 1px, 2px) 1x, f.png") == ["e.png", "f.png"]
    assert srcset_urls("") == []
    endless = ", ".join(f"/i/{n}.png {n}w" for n in range(100_000))
    assert len(srcset_urls(endless)) < 1_000  # only the first characters are read


def test_stylesheets_name_fonts_images_and_imports() -> None:
    css = r"""
      @import url("base.css");
      @import 'theme.css' screen;
      /* url(/commented-out.png) */
      @font-face { src: url(../fonts/f.woff2) format("woff2"), url( '../fonts/f.woff' ); }
      .logo { background: url(data:image/svg+xml;utf8,<svg></svg>) }
      .hero { background-image: URL("/img/hero\ 1.jpg") }
      .esc { background: url("/img/\32 x.png") }
    """
    assert css_requisites(css, "https://cdn.example.com/css/site.css") == [
        "https://cdn.example.com/css/base.css",
        "https://cdn.example.com/css/theme.css",
        "https://cdn.example.com/fonts/f.woff2",
        "https://cdn.example.com/fonts/f.woff",
        "https://cdn.example.com/img/hero%201.jpg",
        "https://cdn.example.com/img/2x.png",
    ]


def test_an_unclosed_comment_hides_the_rest() -> None:
    assert css_requisites("a { } /* url(/x.png)", "https://example.com/") == []
