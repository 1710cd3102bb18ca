import { test } from 'node:test';
import assert from 'node:assert/strict';
import { convertCurrency, businessDays, addBusinessDays, defaultRates, checkRates, ToolError } from './tools.js';
import { toValue, fromValue } from './struct.js';

test('convert_currency', () => {
  const r = convertCurrency(defaultRates, { amount: 100, from: 'eur', to: 'USD' });
  assert.equal(r.converted, 104);
  assert.equal(convertCurrency(defaultRates, { amount: 10, from: 'USD', to: 'JPY' }).converted, 1567);
  assert.throws(() => convertCurrency(defaultRates, { from: 'EUR', to: 'USD' }), (e) => e instanceof ToolError && e.kind === 'INVALID_PARAMETERS');
  assert.throws(() => convertCurrency(defaultRates, { amount: 1, from: 'EUR', to: 'XAU' }), (e) => e.kind === 'NOT_FOUND');
});

test('business_days', () => {
  assert.equal(businessDays({ start: '2025-01-06', end: '2025-01-10' }).business_days, 5);
  assert.equal(businessDays({ start: '2025-01-01', end: '2025-01-31', holidays: ['2025-01-01'] }).business_days, 22);
  assert.equal(businessDays({ start: '2025-01-10', end: '2025-01-06' }).business_days, -5);
  assert.throws(() => businessDays({ start: '2025-02-30', end: '2025-03-01' }), (e) => e.kind === 'INVALID_PARAMETERS');
});

test('add_business_days', () => {
  assert.equal(addBusinessDays({ start: '2025-01-10', days: 1 }).date, '2025-01-13');
  assert.equal(addBusinessDays({ start: '2025-01-13', days: -1 }).date, '2025-01-10');
  assert.equal(addBusinessDays({ start: '2025-12-23', days: 2, holidays: ['2025-12-25', '2025-12-26'] }).date, '2025-12-29');
  assert.throws(() => addBusinessDays({ start: '2025-01-01', days: 1.5 }));
});

test('rates file checks', () => {
  assert.throws(() => checkRates({ base: 'USD', rates: { EUR: -1 } }));
  assert.throws(() => checkRates({ base: 'USD', rates: { EUR: 1 }, extra: 1 }));
  assert.ok(checkRates({ base: 'USD', rates: { EUR: 0.85 } }));
});

test('struct round trip', () => {
  const v = { a: 1, b: 'x', c: [true, null, { d: 2.5 }] };
  const oneof = (x) => { const k = Object.keys(x)[0]; const o = { ...x, kind: k }; if (k === 'structValue') o.structValue = { fields: Object.fromEntries(Object.entries(x.structValue.fields).map(([f, y]) => [f, oneof(y)])) }; if (k === 'listValue') o.listValue = { values: x.listValue.values.map(oneof) }; return o; };
  assert.deepEqual(fromValue(oneof(toValue(v))), v);
});
