// flamegraph.mjs FILE.html - opens sonde's flame graph in Debian's Chromium
// (through playwright-core, a driver nobody here wrote) and checks what a
// person would: frames drawn with names, a tooltip with samples and a
// percentage, zoom on click, search with a matched share, no network.
// Prints one JSON object with what it found; exits non-zero on failure.
import { chromium } from "playwright-core";

const file = process.argv[2];
const leaf = process.argv[3] || "leaf_b_hash";
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const result = {};
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const requests = [];
  page.on("request", (r) => { if (!r.url().startsWith("file:")) requests.push(r.url()); });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto("file://" + file);
  result.frames = await page.locator(".f").count();
  result.names = await page.$$eval(".f", (els) => [...new Set(els.map((e) => e.dataset.name))]);
  const target = page.locator(`.f[data-name="${leaf}"]`).first();
  await target.hover();
  result.tooltip = await page.locator("#tip").innerText();
  const before = await target.boundingBox();
  const parent = page.locator(`.f[data-name="${leaf}"]`).first();
  await parent.click();
  const after = await page.locator(`.f[data-name="${leaf}"]`).first().boundingBox();
  result.zoom_width_before = before.width;
  result.zoom_width_after = after.width;
  await page.click("#reset");
  await page.fill("#search", "leaf");
  result.matched = await page.locator("#matched").innerText();
  result.hits = await page.locator(".f.hit").count();
  result.hit_names = [...new Set(await page.locator(".f.hit").evaluateAll((els) => els.map((e) => e.dataset.name)))].sort();
  result.requests = requests;
  result.errors = errors;
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
