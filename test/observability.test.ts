import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { load } from 'js-yaml';
import { characteristicAlerts } from '../src/otel/index.js';
import { TARGETS } from '../src/otel/catalogue.js';

// The shipped Prometheus rules and Grafana dashboard, checked against what
// damper really exports: an example service (examples/otel-prometheus.ts)
// is started and scraped over HTTP, and every query must name only metrics
// found in its /metrics.

const RULES = 'observability/prometheus-rules.yml';
const RULE_TESTS = 'observability/prometheus-rules.test.yml';
const DASHBOARD = 'observability/grafana-dashboard.json';

interface Rule {
  alert: string;
  expr: string;
  for: string;
  labels: Record<string, string>;
  annotations: { summary: string };
}

function rules(): Rule[] {
  const doc = load(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] };
  return doc.groups.flatMap((g) => g.rules);
}

function promtool(...args: string[]): string {
  const r = spawnSync('promtool', args, { encoding: 'utf8' });
  assert.ok(r.error === undefined, `promtool is needed (Debian's prometheus package; .ci/run installs it): ${String(r.error)}`);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  return r.stdout;
}

/** Metric names a PromQL expression reads: identifiers before a selector or a range, minus functions and keywords. */
function metricNames(expr: string): string[] {
  const names = new Set<string>();
  for (const m of expr.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=\{|\[)/g)) names.add(m[1]!);
  return [...names].filter((n) => n !== 'ALERTS');
}

describe('the Prometheus rules', () => {
  test('promtool parses them, and their unit tests pass (each alert quiet in a normal minute, firing once its ratio held)', () => {
    assert.match(promtool('check', 'rules', RULES), /SUCCESS: 4 rules found/);
    assert.match(promtool('test', 'rules', RULE_TESTS), /SUCCESS/);
  });

  test('they are the same alerts as damper/otel’s characteristicAlerts (name, threshold, for, summary)', () => {
    const shipped = rules();
    assert.deepEqual(shipped.map((r) => r.alert).sort(), characteristicAlerts.map((a) => a.alert).sort());
    for (const a of characteristicAlerts) {
      const rule = shipped.find((r) => r.alert === a.alert)!;
      assert.equal(rule.for, `${a.forMs / 1000}s`, a.alert);
      assert.match(rule.expr.trim(), new RegExp(`> ${a.above.toString().replace('.', '\\.')}$`), a.alert);
      assert.equal(rule.annotations.summary, a.summary, a.alert);
      assert.match(rule.expr, /\[1m\]/, 'the rules’ window is instrument()’s default ratio window');
    }
  });
});

describe('an example service, scraped over HTTP', () => {
  let child: ReturnType<typeof spawn>;
  let port = 0;
  let families = new Map<string, string>();
  let text = '';

  before(async () => {
    child = spawn(process.execPath, ['--import', 'tsx', 'examples/otel-prometheus.ts'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout! });
    const [first] = (await once(lines, 'line')) as [string];
    port = (JSON.parse(first) as { listening: number }).listening;
    const get = async (path: string): Promise<Response> => fetch(`http://127.0.0.1:${port}${path}`);
    // 50 users at once: more than the limiter's 16 slots, so some loads queue.
    await Promise.all(Array.from({ length: 50 }, (_, i) => get(`/users/${i}`).then((r) => r.text())));
    for (let i = 0; i < 3; i++) await (await get('/users/1')).text();
    assert.equal((await get('/users/down')).status, 503);
    const scrape = await get('/metrics');
    assert.equal(scrape.status, 200);
    text = await scrape.text();
    families = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
  });

  after(async () => {
    child.kill('SIGTERM');
    if (child.exitCode === null) await once(child, 'exit');
  });

  test('its /metrics has damper’s instruments with the values the requests made', () => {
    const sample = (line: string): number => Number(new RegExp(`^${line.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);
    assert.equal(families.get('damper_cache_requests_total'), 'counter');
    assert.equal(sample('damper_cache_requests_total{damper_name="users",damper_result="hit",otel_scope_name="damper"}'), 3);
    // The 50 at once queue behind the limiter's 16 slots; on a busy machine they arrive spread out, the queue stands,
    // and CoDel sheds the late ones (the limiter's default): each of them an error, counted by the limiter as shed.
    // So what the requests made is exact whatever the timing: every first read a miss or an error, one error the
    // "down" user's, the rest the limiter's sheds.
    const miss = sample('damper_cache_requests_total{damper_name="users",damper_result="miss",otel_scope_name="damper"}');
    const errors = sample('damper_cache_requests_total{damper_name="users",damper_result="error",otel_scope_name="damper"}');
    const shed = [...text.matchAll(/^damper_limiter_shed_total\{[^}]*damper_name="users"[^}]*\} (\S+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    assert.equal(miss + errors, 50 + 1, `misses ${miss} and errors ${errors}: each first read of the 50 and "down"`);
    assert.equal(errors - 1, shed, `errors ${errors}: "down" and the limiter's ${shed} sheds`);
    assert.ok(miss >= 16, `misses ${miss}: at least the first 16 loads ran`);
    assert.equal(families.get('damper_cache_load_duration'), 'histogram');
    assert.equal(families.get('damper_limiter_queue_delay'), 'histogram', 'loads queued behind the limiter');
    assert.equal(families.get('damper_cache_origin_amplification'), 'gauge');
    assert.equal(families.get('damper_balancer_upstream_in_flight'), 'gauge');
  });

  test('every query of the rules and of the Grafana dashboard names only metrics it exports', () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: { targets?: { expr: string }[] }[]; templating: { list: { query?: unknown }[] } };
    const exprs = [
      ...rules().map((r) => r.expr),
      ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
      ...dashboard.templating.list.flatMap((v) => (typeof v.query === 'string' && v.query.startsWith('label_values(') ? [v.query.replace(/^label_values\(([^,]+),.*$/, '$1{}')] : [])),
    ];
    const exported = (name: string): boolean => families.has(name) || (/_(bucket|sum|count)$/.test(name) && families.get(name.replace(/_(bucket|sum|count)$/, '')) === 'histogram');
    let checked = 0;
    for (const expr of exprs) {
      const names = metricNames(expr);
      assert.ok(names.length > 0, `no metric found in ${expr}`);
      for (const name of names) {
        assert.ok(exported(name), `${name} (in ${expr}) is not in the example's /metrics`);
        checked++;
      }
    }
    assert.ok(checked > 30, `${checked} names checked`);
  });
});

describe('docs/observability.md', () => {
  test('its table lists every instrument, with its kind and unit, and nothing else', () => {
    const doc = readFileSync('docs/observability.md', 'utf8');
    const rows = new Map([...doc.matchAll(/^\| `(damper\.[a-z_.]+)` \| (\w+) \| `([^`]*)` \|/gm)].map((m) => [m[1]!, `${m[2]} ${m[3]}`]));
    const made = TARGETS.flatMap((t) => t.instruments);
    assert.deepEqual([...rows.keys()].sort(), made.map((i) => i.name).sort());
    for (const i of made) assert.equal(rows.get(i.name), `${i.kind} ${i.unit}`, i.name);
  });
});
