// A screenshot of TensorBoard in headless Chromium (Debian's package), with playwright-core from npm:
//   npm install --prefix /tmp/tb-shot playwright-core
//   NODE_PATH=/tmp/tb-shot/node_modules node docs/screenshot.mjs URL TAB TAG_REGEX OUT.png [WIDTH HEIGHT]
// TAB is `images` (pictures at their actual size) or `timeseries` (scalars and pictures in cards);
// TAG_REGEX picks what is shown, e.g. 'val/(confusion_matrix|confident_mistakes)'.
import { createRequire } from 'node:module';

const { chromium } = createRequire(import.meta.url)('playwright-core'); // found through NODE_PATH too

const [base, tab, filter, out, width = '1200', height = '800'] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: Number(width), height: Number(height) } });
  const tagFilter = encodeURIComponent(filter);
  if (tab === 'images') {
    await page.goto(`${base}/?darkMode=false#images&tagFilter=${tagFilter}`);
    await page.getByText('Show actual image size').click();
  } else {
    await page.goto(`${base}/?darkMode=false&tagFilter=${tagFilter}#timeseries`);
    await page.locator('button[aria-label="Close side pane"]').click();
  }
  // the frontend lists the tags, then each card fetches its data: wait for a chart or an image, then every image decoded
  await page.waitForSelector('img, canvas', { timeout: 30000 });
  await page.waitForFunction(() => [...document.querySelectorAll('img')].every((img) => img.complete && img.naturalWidth > 0), null, { timeout: 30000 });
  await page.waitForTimeout(1500);
  await page.screenshot({ path: out });
} finally {
  await browser.close();
}
