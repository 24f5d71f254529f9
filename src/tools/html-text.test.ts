import { describe, expect, it } from "vitest";
import { htmlToText } from "./html-text.js";

const article = `<!doctype html><html><head><title>Veltmoor — World Wiki</title><style>p{}</style></head>
<body><nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>Veltmoor</h1>
<p>Veltmoor is a river town in the province of Arden. It was founded in 1712 by salt traders who
crossed the Sable at its shallowest point.</p>
<p>The town's mayor is Ilse Brandt, elected in 2019. Veltmoor is known for its <a href="/gb">glass bridge</a>,
which opened in 1899 and is 120 metres long.</p>
<ul><li>Population: 12,000</li><li>Area: 41 km²</li></ul></article>
<footer>© World Wiki</footer><script>track()</script></body></html>`;

describe("htmlToText", () => {
  it("extracts the article with paragraph breaks and list items, without page furniture", () => {
    const { title, text } = htmlToText(article);
    expect(title).toBe("Veltmoor — World Wiki");
    expect(text).toContain("Veltmoor is a river town in the province of Arden. It was founded in 1712");
    expect(text).toContain("salt traders who crossed the Sable");
    expect(text).toMatch(/shallowest point\.\n\nThe town's mayor/);
    expect(text).toContain("- Population: 12,000\n- Area: 41 km²");
    for (const furniture of ["Home", "About", "© World Wiki", "track()", "p{}"])
      expect(text).not.toContain(furniture);
  });

  it("falls back to the visible text of pages without an article", () => {
    const page = `<html><head><title>Stats</title><script>x()</script></head><body>
      <nav>menu</nav><table><tr><th>Town</th><th>People</th></tr><tr><td>Dunmere</td><td>830</td></tr></table>
      <div>Updated 2020<br>by the census office</div></body></html>`;
    expect(htmlToText(page)).toEqual({
      title: "Stats",
      text: "Town | People\nDunmere | 830\n\nUpdated 2020\nby the census office",
    });
  });

  it("survives broken markup", () => {
    expect(htmlToText("<p>unclosed <b>bold <i>text").text).toBe("unclosed bold text");
    expect(htmlToText("").text).toBe("");
  });
});
