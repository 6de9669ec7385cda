// Debian's Chromium (/usr/bin/chromium, installed by `make system-packages`), driven by
// playwright-core, for tests that look at a page the way a person would. The flags keep it
// from reaching for Google's hosts, which this machine's closed network refuses; playwright
// gives each launch a fresh empty profile of its own.
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export async function launchChromium(): Promise<{ browser: Browser; close(): Promise<void> }> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install the Debian package chromium (make system-packages does)`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    browser,
    async close() {
      await browser.close();
    },
  };
}
