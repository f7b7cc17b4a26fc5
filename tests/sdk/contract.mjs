// fake-payments' Stripe dialect driven by the official Node SDK (npm's `stripe`, 23.2.0, pinned by
// package-lock.json next to this file).
//
//     cd tests/sdk && node contract.mjs BASE_URL [--scenario surface|echo|retry] [options]
//
// One scenario per invocation, against a fake that `tests/it/sdk_contract.rs` started; that test
// sets the fault plan and the `Stripe-Should-Retry` advice before a run and reads the ground-truth
// ledger after it (this script cannot see either). Every check prints one JSON line
// (`{"check": NAME, "ok": true}`); the first failure prints `{"check": NAME, "ok": false,
// "error": WHY}`, says why on stderr and exits 1. A scenario ends with one `{"summary": ...}` or
// `{"result": ...}` line the Rust side reads.
//
// Scenarios (the same as contract.py's):
//   surface  every call an integration makes (create, confirm, retrieve, list and its pages,
//            search, capture, cancel, refunds), each error parsed into its class, and the fields
//            an integration reads.
//   echo     the `Idempotency-Key` response header the SDK exposes as `lastResponse.idempotencyKey`
//            (RequestSender._addHeadersDirectlyToObject).
//   retry    one confirmed creation under whatever fault the Rust side planned, with
//            `--retries N` (the `maxNetworkRetries` config; the SDK's default when absent) and
//            the outcome the SDK must give (`--expect ok|api_error|connection_error`).
//
// What the SDK does on a failure is read from its source (node_modules/stripe/esm, which
// `import Stripe from 'stripe'` loads under Node; cjs/ holds the same code), not assumed:
// - PlatformFunctions.getDefaultMaxNetworkRetries() returns 2 and NodePlatformFunctions does not
//   override it, so a client configured without `maxNetworkRetries` retries twice.
// - RequestSender._shouldRetry: an error whose code is in HttpClient.CONNECTION_CLOSED_ERROR_CODES
//   (['ECONNRESET', 'EPIPE']) is retried once when no retry has happened yet, BEFORE the budget is
//   looked at (so even with maxNetworkRetries 0); otherwise a spent budget stops; then a
//   connection error is retried, `Stripe-Should-Retry: false|true` decides, then 409 and >= 500
//   are retried.
// - RequestSender._defaultIdempotencyKey keys every v1 POST (`stripe-node-retry-<uuid4>`), even
//   with maxNetworkRetries 0, and the retries of one call reuse its headers (the same key).

import Stripe from 'stripe';

const KEY = 'sk_test_a';
const CARD = {amount: 2000, currency: 'usd', payment_method: 'pm_card_visa', confirm: true};
const E = Stripe.errors;

class Failed extends Error {
  constructor(check, why) {
    super(`${check}: ${why}`);
    this.check = check;
    this.why = why;
  }
}

const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const show = (v) => JSON.stringify(v);

function check(name, cond, why = 'does not hold') {
  if (!cond) throw new Failed(name, why);
  emit({check: name, ok: true});
}

// Deep equality through JSON with sorted keys (SDK objects are plain data plus a
// non-enumerable `lastResponse`).
function canon(v) {
  if (Array.isArray(v)) return v.map(canon);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])]));
  }
  return v;
}
const eq = (name, got, want) =>
  check(name, show(canon(got)) === show(canon(want)), `got ${show(got)}, want ${show(want)}`);
const prefix = (name, got, want) =>
  check(name, typeof got === 'string' && got.startsWith(want), `got ${show(got)}, want a string starting with ${show(want)}`);

// Runs `fn`; it must reject with exactly `cls` (not a sibling or a parent class).
async function raises(name, cls, fn) {
  let got;
  try {
    got = await fn();
  } catch (e) {
    check(`${name}: raises ${cls.name}`, e && e.constructor === cls, `raised ${e && e.constructor && e.constructor.name}: ${e && e.message}`);
    return e;
  }
  throw new Failed(`${name}: raises ${cls.name}`, `returned ${show(got)} instead of raising`);
}

function client(base, extra = {}, key = KEY) {
  const u = new URL(base);
  return new Stripe(key, {host: u.hostname, port: u.port, protocol: 'http', ...extra});
}

// The object as the API sent it (without the SDK's `lastResponse`).
const plain = (o) => JSON.parse(JSON.stringify(o));

function anIntent(name, pi) {
  eq(`${name}: object`, pi.object, 'payment_intent');
  prefix(`${name}: id`, pi.id, 'pi_');
  eq(`${name}: livemode`, pi.livemode, false);
  check(`${name}: created`, Number.isInteger(pi.created) && pi.created > 0, show(pi.created));
  prefix(`${name}: client_secret`, pi.client_secret, pi.id + '_secret_');
  eq(`${name}: payment_method_types`, pi.payment_method_types, ['card']);
}

function aReply(name, obj) {
  eq(`${name}: HTTP status`, obj.lastResponse.statusCode, 200);
  prefix(`${name}: Request-Id`, obj.lastResponse.requestId, 'req_');
}

// ---------- surface ----------

async function surface(base) {
  const s = client(base);
  const intents = []; // every intent this run created, charged or not
  const refunds = [];
  const explicit = []; // the idempotency keys this script chose (all others are the SDK's)

  // A confirmed creation: the charge, in one call.
  const pi = await s.paymentIntents.create({...CARD, metadata: {order_id: 'o-1'}, description: 'contract o-1'});
  intents.push(pi.id);
  anIntent('create confirmed', pi);
  aReply('create confirmed', pi);
  eq('create confirmed: status', pi.status, 'succeeded');
  eq('create confirmed: amount', pi.amount, 2000);
  eq('create confirmed: amount_received', pi.amount_received, 2000);
  eq('create confirmed: amount_capturable', pi.amount_capturable, 0);
  eq('create confirmed: currency', pi.currency, 'usd');
  eq('create confirmed: metadata', pi.metadata, {order_id: 'o-1'});
  eq('create confirmed: description', pi.description, 'contract o-1');
  eq('create confirmed: payment_method', pi.payment_method, 'pm_card_visa');
  eq('create confirmed: capture_method', pi.capture_method, 'automatic');
  eq('create confirmed: last_payment_error', pi.last_payment_error, null);
  prefix('create confirmed: latest_charge', pi.latest_charge, 'ch_');
  eq('create confirmed: not a replay', pi.lastResponse.headers['idempotent-replayed'] ?? null, null);

  // The same call under one key, twice: the second is the first's reply, replayed.
  explicit.push('contract-replay-1');
  const same = {...CARD, amount: 1200, metadata: {order_id: 'o-2'}};
  const first = await s.paymentIntents.create(same, {idempotencyKey: 'contract-replay-1'});
  intents.push(first.id);
  const again = await s.paymentIntents.create(same, {idempotencyKey: 'contract-replay-1'});
  eq('replay: same intent', again.id, first.id);
  eq('replay: same body', plain(again), plain(first));
  eq('replay: Idempotent-Replayed', again.lastResponse.headers['idempotent-replayed'], 'true');

  // Changed parameters under a used key.
  let e = await raises('changed parameters under one key', E.StripeIdempotencyError, () =>
    s.paymentIntents.create({...same, amount: 1201}, {idempotencyKey: 'contract-replay-1'}),
  );
  eq('idempotency error: HTTP status', e.statusCode, 400);
  eq('idempotency error: type', e.rawType, 'idempotency_error');

  // Created unconfirmed, with a method: nothing charged until /confirm.
  const draft = await s.paymentIntents.create({amount: 700, currency: 'eur', payment_method: 'pm_card_visa'});
  intents.push(draft.id);
  anIntent('create unconfirmed', draft);
  eq('create unconfirmed: status', draft.status, 'requires_confirmation');
  eq('create unconfirmed: amount_received', draft.amount_received, 0);
  eq('create unconfirmed: latest_charge', draft.latest_charge, null);
  eq('retrieve unconfirmed: status', (await s.paymentIntents.retrieve(draft.id)).status, 'requires_confirmation');
  const done = await s.paymentIntents.confirm(draft.id);
  anIntent('confirm', done);
  eq('confirm: same intent', done.id, draft.id);
  eq('confirm: status', done.status, 'succeeded');
  eq('confirm: amount_received', done.amount_received, 700);
  eq('confirm: currency', done.currency, 'eur');
  e = await raises('confirm twice', E.StripeInvalidRequestError, () => s.paymentIntents.confirm(draft.id));
  eq('confirm twice: HTTP status', e.statusCode, 400);
  eq('confirm twice: code', e.code, 'payment_intent_unexpected_state');

  // Created with no method: the method comes with /confirm.
  const bare = await s.paymentIntents.create({amount: 900, currency: 'usd'});
  intents.push(bare.id);
  eq('create without a method: status', bare.status, 'requires_payment_method');
  const paid = await s.paymentIntents.confirm(bare.id, {payment_method: 'pm_card_visa'});
  eq('confirm with a method: status', paid.status, 'succeeded');
  eq('confirm with a method: payment_method', paid.payment_method, 'pm_card_visa');

  // Retrieval.
  const got = await s.paymentIntents.retrieve(pi.id);
  anIntent('retrieve', got);
  aReply('retrieve', got);
  eq('retrieve: the created intent', plain(got), plain(pi));
  e = await raises('retrieve an unknown intent', E.StripeInvalidRequestError, () =>
    s.paymentIntents.retrieve('pi_00000000000000000000000000000000'),
  );
  eq('unknown intent: HTTP status', e.statusCode, 404);
  eq('unknown intent: code', e.code, 'resource_missing');
  eq('unknown intent: param', e.param, 'id');

  // Declines: a StripeCardError carrying the intent and its decline code.
  for (const [pm, decline] of [
    ['pm_card_chargeDeclined', 'generic_decline'],
    ['pm_card_chargeDeclinedInsufficientFunds', 'insufficient_funds'],
  ]) {
    e = await raises(`decline ${pm}`, E.StripeCardError, () =>
      s.paymentIntents.create({...CARD, amount: 500, payment_method: pm}),
    );
    eq(`decline ${pm}: HTTP status`, e.statusCode, 402);
    eq(`decline ${pm}: code`, e.code, 'card_declined');
    eq(`decline ${pm}: type`, e.rawType, 'card_error');
    eq(`decline ${pm}: decline_code`, e.decline_code, decline);
    const declined = e.payment_intent;
    check(`decline ${pm}: payment_intent`, declined && typeof declined === 'object', show(declined));
    intents.push(declined.id);
    eq(`decline ${pm}: payment_intent.object`, declined.object, 'payment_intent');
    prefix(`decline ${pm}: payment_intent.id`, declined.id, 'pi_');
    eq(`decline ${pm}: intent status`, declined.status, 'requires_payment_method');
    eq(`decline ${pm}: amount_received`, declined.amount_received, 0);
    eq(`decline ${pm}: last_payment_error.decline_code`, declined.last_payment_error?.decline_code, decline);
    eq(`decline ${pm}: the intent as retrieved`, (await s.paymentIntents.retrieve(declined.id)).status, 'requires_payment_method');
  }

  // Refusals before anything happens: StripeInvalidRequestError naming the parameter.
  e = await raises('an unknown parameter', E.StripeInvalidRequestError, () =>
    s.paymentIntents.create({amount: 500, currency: 'usd', colour: 'red'}),
  );
  eq('unknown parameter: HTTP status', e.statusCode, 400);
  eq('unknown parameter: param', e.param, 'colour');
  eq('unknown parameter: code', e.code, 'parameter_unknown');
  e = await raises('a missing amount', E.StripeInvalidRequestError, () => s.paymentIntents.create({currency: 'usd'}));
  eq('missing amount: param', e.param, 'amount');
  eq('missing amount: code', e.code, 'parameter_missing');

  // A bad credential.
  e = await raises('a bad API key', E.StripeAuthenticationError, () =>
    client(base, {}, 'sk_test_nobody').paymentIntents.list(),
  );
  eq('bad API key: HTTP status', e.statusCode, 401);

  // Manual capture.
  const held = await s.paymentIntents.create({...CARD, capture_method: 'manual', metadata: {order_id: 'o-3'}});
  intents.push(held.id);
  eq('authorise: status', held.status, 'requires_capture');
  eq('authorise: capture_method', held.capture_method, 'manual');
  eq('authorise: amount_capturable', held.amount_capturable, 2000);
  eq('authorise: amount_received', held.amount_received, 0);
  const captured = await s.paymentIntents.capture(held.id);
  eq('capture: same intent', captured.id, held.id);
  eq('capture: status', captured.status, 'succeeded');
  eq('capture: amount_received', captured.amount_received, 2000);
  eq('capture: amount_capturable', captured.amount_capturable, 0);
  e = await raises('capture twice', E.StripeInvalidRequestError, () => s.paymentIntents.capture(held.id));
  eq('capture twice: code', e.code, 'payment_intent_unexpected_state');

  // Cancel: an authorisation, a draft; not a captured payment.
  const voided = await s.paymentIntents.create({...CARD, capture_method: 'manual'});
  intents.push(voided.id);
  const canceled = await s.paymentIntents.cancel(voided.id, {cancellation_reason: 'requested_by_customer'});
  eq('cancel an authorisation: status', canceled.status, 'canceled');
  eq('cancel an authorisation: amount_received', canceled.amount_received, 0);
  const unsent = await s.paymentIntents.create({amount: 300, currency: 'usd'});
  intents.push(unsent.id);
  eq('cancel a draft: status', (await s.paymentIntents.cancel(unsent.id)).status, 'canceled');
  e = await raises('cancel a captured payment', E.StripeInvalidRequestError, () => s.paymentIntents.cancel(captured.id));
  eq('cancel a captured payment: code', e.code, 'payment_intent_unexpected_state');

  // Listing: pages by starting_after, and the SDK's own auto-pagination over them.
  const page = await s.paymentIntents.list({limit: 2});
  eq('list: object', page.object, 'list');
  eq('list: url', page.url, '/v1/payment_intents');
  eq('list: page size', page.data.length, 2);
  eq('list: has_more', page.has_more, true);
  check('list: items are payment intents', page.data.every((x) => x.object === 'payment_intent'));
  const rest = await s.paymentIntents.list({limit: 2, starting_after: page.data[page.data.length - 1].id});
  const firstIds = new Set(page.data.map((x) => x.id));
  check(
    'list: the next page does not repeat the first',
    !rest.data.some((x) => firstIds.has(x.id)),
    `${show([...firstIds])} then ${show(rest.data.map((x) => x.id))}`,
  );
  const walked = (await s.paymentIntents.list({limit: 1}).autoPagingToArray({limit: 1000})).map((x) => x.id);
  eq('auto-pagination: no intent twice', walked.length, new Set(walked).size);
  const missing = intents.filter((i) => i !== unsent.id && !walked.includes(i));
  check('auto-pagination: every charged intent listed', missing.length === 0, `missing ${show(missing)} from ${show(walked)}`);

  // Search by metadata (Stripe's search syntax), and its pages (`page` = `next_page`).
  const found = await s.paymentIntents.search({query: "metadata['order_id']:'o-1'"});
  eq('search: object', found.object, 'search_result');
  eq('search: url', found.url, '/v1/payment_intents/search');
  eq('search: hits', found.data.map((x) => x.id), [pi.id]);
  eq('search: has_more', found.has_more, false);
  eq('search: next_page', found.next_page, null);
  const both = await s.paymentIntents.search({query: "status:'succeeded' AND metadata['order_id']:'o-3'"});
  eq('search with AND: hits', both.data.map((x) => x.id), [held.id]);
  const batch = [];
  for (let i = 0; i < 3; i++) {
    const b = await s.paymentIntents.create({...CARD, metadata: {batch: 'b-1'}});
    intents.push(b.id);
    batch.push(b.id);
  }
  const firstPage = await s.paymentIntents.search({query: "metadata['batch']:'b-1'", limit: 2});
  eq('search page: size', firstPage.data.length, 2);
  eq('search page: has_more', firstPage.has_more, true);
  check('search page: next_page', Boolean(firstPage.next_page), show(firstPage.next_page));
  const every = (await s.paymentIntents.search({query: "metadata['batch']:'b-1'", limit: 2}).autoPagingToArray({limit: 100})).map((x) => x.id);
  eq('search auto-pagination: every hit once', [...every].sort(), [...batch].sort());

  // Refunds.
  const r = await s.refunds.create({payment_intent: pi.id, amount: 500});
  refunds.push(r.id);
  aReply('refund', r);
  eq('refund: object', r.object, 'refund');
  prefix('refund: id', r.id, 're_');
  eq('refund: amount', r.amount, 500);
  eq('refund: currency', r.currency, 'usd');
  eq('refund: payment_intent', r.payment_intent, pi.id);
  eq('refund: charge', r.charge, pi.latest_charge);
  eq('refund: status', r.status, 'succeeded');
  eq('refund retrieve: the refund', plain(await s.refunds.retrieve(r.id)), plain(r));
  e = await raises('refund more than is left', E.StripeInvalidRequestError, () =>
    s.refunds.create({payment_intent: pi.id, amount: 1501}),
  );
  eq('refund too much: HTTP status', e.statusCode, 400);
  const restRefund = await s.refunds.create({payment_intent: pi.id});
  refunds.push(restRefund.id);
  eq('refund the rest: amount', restRefund.amount, 1500);
  e = await raises('refund a fully refunded payment', E.StripeInvalidRequestError, () =>
    s.refunds.create({payment_intent: pi.id}),
  );
  eq('refund a fully refunded payment: code', e.code, 'charge_already_refunded');
  const listed = await s.refunds.list({payment_intent: pi.id});
  eq('refund list: object', listed.object, 'list');
  eq('refund list: url', listed.url, '/v1/refunds');
  eq('refund list: the refunds', listed.data.map((x) => x.id).sort(), [...refunds].sort());
  eq('refund list: has_more', listed.has_more, false);
  e = await raises('retrieve an unknown refund', E.StripeInvalidRequestError, () =>
    s.refunds.retrieve('re_00000000000000000000000000000000'),
  );
  eq('unknown refund: HTTP status', e.statusCode, 404);

  // Stripe lists "sorted by creation date, with the most recently created appearing first"; an
  // integration reading `list({limit: 1})` as "the latest" relies on it. Checked last, so a wrong
  // order does not hide the checks above.
  const charged = intents.filter((i) => i !== unsent.id);
  const newestFirst = (await s.paymentIntents.list({limit: 3}).autoPagingToArray({limit: 1000})).map((x) => x.id);
  eq('list: newest first', newestFirst.filter((i) => charged.includes(i)), [...charged].reverse());

  emit({
    summary: {
      sdk: 'node',
      sdk_version: s.VERSION,
      api_version: s.getApiField('version'),
      intents,
      refunds,
      explicit_keys: explicit,
      uncharged: [unsent.id],
    },
  });
}

// ---------- echo ----------

async function echo(base) {
  const s = client(base);
  const chosen = await s.paymentIntents.create(CARD, {idempotencyKey: 'contract-echo-1'});
  // Stripe reflects the key a POST carried in its reply's `Idempotency-Key` header (stripe-mock
  // does it "like the Stripe API does"); the SDK reads it from there
  // (RequestSender._addHeadersDirectlyToObject).
  eq('a chosen key is echoed (lastResponse.idempotencyKey)', chosen.lastResponse.idempotencyKey ?? null, 'contract-echo-1');
  const generated = await s.paymentIntents.create(CARD);
  const key = generated.lastResponse.idempotencyKey;
  check('the SDK\'s own key is echoed (lastResponse.idempotencyKey)', typeof key === 'string' && key !== '', show(key));
  emit({result: {generated_key: key, intent: generated.id}});
}

// ---------- retry ----------

// A `commit_then_drop` fault closes the connection after the charge, with no reply. Node's http
// client reports that as `Error: socket hang up` with code ECONNRESET (observed against the fake),
// which is in HttpClient.CONNECTION_CLOSED_ERROR_CODES: `_shouldRetry` retries it once, under the
// same Idempotency-Key, even with maxNetworkRetries 0 and whatever Stripe-Should-Retry says (there
// is no reply to carry it), and the retry gets the first request's saved reply, replayed: the
// call succeeds. tests/it/sdk_contract.rs asserts that outcome here and two requests, one effect,
// in the ledger.
async function retry(base, retries, expect, status) {
  const s = client(base, retries === undefined ? {} : {maxNetworkRetries: retries});
  let pi;
  try {
    pi = await s.paymentIntents.create(CARD);
  } catch (e) {
    const outcome =
      e.constructor === E.StripeAPIError ? 'api_error' : e.constructor === E.StripeConnectionError ? 'connection_error' : e.constructor.name;
    eq('outcome', outcome, expect);
    if (expect === 'api_error') {
      eq('api_error: HTTP status', e.statusCode, status);
      eq('api_error: type', e.rawType, 'api_error');
    }
    emit({result: {outcome, status: e.statusCode ?? null, max_network_retries: s.getMaxNetworkRetries()}});
    return;
  }
  eq('outcome', 'ok', expect);
  anIntent('retried create', pi);
  eq('retried create: status', pi.status, 'succeeded');
  emit({
    result: {
      outcome: 'ok',
      intent: pi.id,
      replayed: pi.lastResponse.headers['idempotent-replayed'] === 'true',
      max_network_retries: s.getMaxNetworkRetries(),
    },
  });
}

function usage(why) {
  process.stderr.write(`contract.mjs: ${why}\nusage: node contract.mjs BASE_URL [--scenario surface|echo|retry] [--retries N] [--expect ok|api_error|connection_error] [--status N]\n`);
  process.exit(2);
}

async function main() {
  const args = process.argv.slice(2);
  const opts = {scenario: 'surface', expect: 'ok', status: 500};
  let base;
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a.startsWith('--')) {
      const v = args[++i];
      if (v === undefined) usage(`${a} needs a value`);
      if (a === '--scenario') opts.scenario = v;
      else if (a === '--retries') opts.retries = Number.parseInt(v, 10);
      else if (a === '--expect') opts.expect = v;
      else if (a === '--status') opts.status = Number.parseInt(v, 10);
      else usage(`unknown option ${a}`);
    } else if (base === undefined) base = a;
    else usage(`unexpected argument ${a}`);
  }
  if (base === undefined) usage('the base URL is missing');
  if (!['surface', 'echo', 'retry'].includes(opts.scenario)) usage(`unknown scenario ${opts.scenario}`);
  if (!['ok', 'api_error', 'connection_error'].includes(opts.expect)) usage(`unknown outcome ${opts.expect}`);
  try {
    if (opts.scenario === 'surface') await surface(base);
    else if (opts.scenario === 'echo') await echo(base);
    else await retry(base, opts.retries, opts.expect, opts.status);
  } catch (e) {
    if (e instanceof Failed) {
      emit({check: e.check, ok: false, error: e.why});
      process.stderr.write(`contract.mjs ${opts.scenario}: FAILED ${e.check}: ${e.why}\n`);
    } else {
      // The SDK could not parse a reply, or an unexpected error.
      emit({check: 'unexpected exception', ok: false, error: String(e && e.stack)});
      process.stderr.write(`contract.mjs ${opts.scenario}: FAILED with ${e && e.stack}\n`);
    }
    process.exitCode = 1;
  }
}

await main();
// Exit now rather than when the event loop drains: when the SDK retries on a reply (a 5xx), it
// leaves that reply's body unread (RequestSender calls `res.dispose?.()`, which
// NodeHttpClientResponse does not define), so its keep-alive socket stays open until the server
// times the idle connection out (10 s for the fake). stdout is a pipe here, written synchronously
// on Linux, so nothing printed is lost.
process.exit();
