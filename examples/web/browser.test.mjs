// The chat of examples/web in a real browser: Debian's chromium, driven by
// playwright-core, against the example on each embedded fake. It types a
// question and sees the answer come in pieces and the calls shown; reloads
// the page in the middle of the answer and sees it complete, once;
// approves one refund and denies another by clicking; and checks that the
// refund ran exactly once (the example prints each refund it makes).
//
// TOOLRELAY_WEB_EXAMPLE is the command that runs the example (main_test.go
// sets it to its own test binary); CHROMIUM the browser (/usr/bin/chromium);
// on failure, screenshots of each state are written to SCREENSHOTS (a new
// temporary folder by default).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const example = process.env.TOOLRELAY_WEB_EXAMPLE;
const executablePath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const flags = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const question = 'What happened to my orders 7 and 8?';
const answer = 'Order 7 is 1 espresso machine, 150. Order 8 is 1 coffee grinder, 120. Both were delivered last week, ' +
  'the espresso machine on Monday and the grinder on Wednesday. ' +
  'If either of them is not what you expected, I can refund it in full: just ask.';
// What the model reads of a denied call depends on the service (Foundry's
// outputs carry no failure flag: it reads {"error": …}).
const refundAnswer = /^Order 7: refunded 150 on order 7\. Order 8: .*a person denied this call: the customer service agent said no.*\.$/;

// startExample runs the example on backend and returns its URL, what it
// printed, and a way to stop it.
async function startExample(backend) {
  const [cmd, ...args] = example.split(' ');
  const proc = spawn(cmd, [...args, '-addr', '127.0.0.1:0'], {
    env: { ...process.env, TOOLRELAY_BACKEND: backend, TOOLRELAY_CONFIG: '', TOOLRELAY_SCRIPT: '', TOOLRELAY_JOURNAL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stderr.on('data', d => { err += d; });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the example printed no URL in 30 s:\n${out}\n${err}`)), 30_000);
    proc.stdout.on('data', d => {
      out += d;
      const m = out.match(/at (http:\/\/\S+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on('exit', code => reject(new Error(`the example exited (${code}):\n${out}\n${err}`)));
  });
  return { url, output: () => out, errors: () => err, stop: () => proc.kill() };
}

let shots;

before(() => {
  assert.ok(example, 'TOOLRELAY_WEB_EXAMPLE names the example to run');
  shots = process.env.SCREENSHOTS ?? mkdtempSync(join(tmpdir(), 'toolrelay-web-shots-'));
});

for (const backend of ['fake-openai', 'fake-foundry', 'fake-responses']) {
  test(`chat in the browser on ${backend}`, { timeout: 120_000 }, async () => {
    const server = await startExample(backend);
    const profile = mkdtempSync(join(tmpdir(), 'toolrelay-chromium-'));
    const context = await chromium.launchPersistentContext(profile, { executablePath, headless: true, args: flags });
    const page = context.pages()[0] ?? await context.newPage();
    const states = [];
    const shot = async name => states.push({ name, png: await page.screenshot({ fullPage: true }) });
    const assistantText = () => page.locator('.message.assistant').last().locator('.text').allTextContents();
    const status = () => page.locator('#status').getAttribute('data-status');
    const readyWithin = async ms => page.waitForSelector('#status[data-status="ready"]', { timeout: ms });
    try {
      await page.goto(server.url);
      await shot('loaded');

      // A question: the calls are shown, then the answer in pieces.
      await page.fill('#input', question);
      await page.press('#input', 'Enter');
      const pieces = new Set();
      for (let t0 = Date.now(); Date.now() - t0 < 20_000;) {
        const text = (await assistantText()).join('');
        if (text.length > 0 && text.length < answer.length) pieces.add(text.length);
        if (pieces.size >= 3) break;
        await page.waitForTimeout(10);
      }
      assert.ok(pieces.size >= 3, `the answer came in pieces: saw ${[...pieces]} characters of ${answer.length}`);
      const lookups = page.locator('.message.assistant .tool[data-tool="lookup_order"][data-state="output-available"]');
      assert.equal(await lookups.count(), 2, 'both lookups shown, with their outputs');
      assert.match(await lookups.first().textContent(), /espresso machine/);
      await shot('answer in pieces');

      // A reload in the middle of the answer: it completes, once.
      const before = (await assistantText()).join('');
      assert.equal(await status(), 'streaming', 'the answer is still being written');
      assert.ok(before.length < answer.length, 'the reload comes before the end of the answer');
      await page.reload();
      await shot('reloaded');
      await readyWithin(30_000);
      await page.waitForFunction(a => [...document.querySelectorAll('.message.assistant .text')].some(e => e.textContent === a), answer, { timeout: 30_000 });
      await shot('answer complete after the reload');
      assert.equal(await page.locator('.message.user').count(), 1, 'the question shown once');
      assert.equal(await page.locator('.message.assistant').count(), 1, 'one answer');
      assert.deepEqual(await assistantText(), [answer], 'the answer whole, without a repeat');
      assert.equal(await lookups.count(), 2, 'both lookups still shown once each');
      assert.equal(await page.locator('.message.assistant .reasoning').count(), 1, 'the reasoning shown once');

      // Two refunds wait for a click: approve one, deny the other.
      await page.fill('#input', 'Refund both orders in full.');
      await page.press('#input', 'Enter');
      const asking = page.locator('.tool[data-tool="refund"][data-state="approval-requested"]');
      await page.waitForFunction(() => document.querySelectorAll('.tool[data-tool="refund"][data-state="approval-requested"]').length === 2, null, { timeout: 30_000 });
      await shot('approvals requested');
      await asking.filter({ hasText: '"order":"7"' }).locator('button.approve').click();
      await asking.filter({ hasText: '"order":"8"' }).locator('button.deny').click();
      await page.waitForFunction(() => [...document.querySelectorAll('.message.assistant .text')].some(e => e.textContent.startsWith('Order 7: ')), null, { timeout: 30_000 });
      await readyWithin(30_000);
      await shot('refunds answered');
      assert.match((await assistantText()).join(''), refundAnswer);
      const refunds = page.locator('.tool[data-tool="refund"]');
      assert.equal(await refunds.count(), 2);
      assert.equal(await refunds.filter({ hasText: '"order":"7"' }).getAttribute('data-state'), 'output-available');
      assert.match(await refunds.filter({ hasText: '"order":"7"' }).textContent(), /refunded 150 on order 7/);
      assert.equal(await refunds.filter({ hasText: '"order":"8"' }).getAttribute('data-state'), 'output-denied');
      assert.equal(await page.locator('.message.assistant').count(), 2, 'two answers');

      // The effect: the approved refund ran once, the denied one never.
      const out = server.output();
      assert.equal(out.split('\n').filter(l => l === 'refunded 150 on order 7').length, 1, `refund of order 7 made once:\n${out}`);
      assert.ok(!out.includes('on order 8'), `no refund of order 8:\n${out}`);
    } catch (err) {
      try { await shot('failed'); } catch {}
      const dir = join(shots, backend);
      mkdirSync(dir, { recursive: true });
      states.forEach((s, i) => writeFileSync(join(dir, `${i}-${s.name.replaceAll(' ', '-')}.png`), s.png));
      err.message += `\nscreenshots: ${dir}\nexample's output:\n${server.output()}\n${server.errors()}`;
      throw err;
    } finally {
      await context.close();
      server.stop();
      rmSync(profile, { recursive: true, force: true });
    }
  });
}
