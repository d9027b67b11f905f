'use strict';
// lib/index.d.ts is written by hand: this test checks it against the code (issue 30: it was
// checked only by type tests, never against what the package exports). With the TypeScript
// compiler's own parser it reads every exported class and function of the declarations and
// compares them with the runtime package:
// - the exported values are the same names (a class, function or const missing on either side fails);
// - each exported class has the same public methods (prototype and static) and constructor arity;
// - each function and method declares the parameters the code has: the same number required
//   (the code's `fn.length`) and, for the package's own code, the same names in the same order.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const ts = require('typescript');
const pkg = require('..');

const DTS = path.join(__dirname, '..', 'lib', 'index.d.ts');

/** The exported classes, functions and consts of index.d.ts. */
function declarations() {
  const source = ts.createSourceFile(DTS, fs.readFileSync(DTS, 'utf8'), ts.ScriptTarget.Latest, true);
  const isExported = (node) => (ts.getCombinedModifierFlags(node) & ts.ModifierFlags.Export) !== 0;
  const params = (node) =>
    node.parameters.map((p) => ({ name: p.name.getText(source), required: !p.questionToken && !p.initializer && !p.dotDotDotToken, rest: !!p.dotDotDotToken }));
  const classes = new Map();
  const functions = new Map();
  const consts = new Set();
  const aliases = [];
  for (const statement of source.statements) {
    if (ts.isClassDeclaration(statement) && statement.name && isExported(statement)) {
      const members = { methods: new Map(), statics: new Map(), ctor: null };
      for (const m of statement.members) {
        const isPrivate = m.modifiers && m.modifiers.some((x) => x.kind === ts.SyntaxKind.PrivateKeyword);
        if (isPrivate) continue;
        if (ts.isConstructorDeclaration(m)) members.ctor = params(m);
        else if (ts.isMethodDeclaration(m)) {
          const isStatic = m.modifiers && m.modifiers.some((x) => x.kind === ts.SyntaxKind.StaticKeyword);
          (isStatic ? members.statics : members.methods).set(m.name.getText(source), params(m));
        }
      }
      classes.set(statement.name.text, members);
    } else if (ts.isFunctionDeclaration(statement) && statement.name && isExported(statement)) {
      functions.set(statement.name.text, params(statement));
    } else if (ts.isVariableStatement(statement) && isExported(statement)) {
      for (const d of statement.declarationList.declarations) consts.add(d.name.getText(source));
    } else if (ts.isExportDeclaration(statement) && statement.exportClause && ts.isNamedExports(statement.exportClause)) {
      aliases.push(...statement.exportClause.elements.map((e) => [e.name.text, (e.propertyName || e.name).text]));
    }
  }
  // `export { ThrottlerStorageRedisModule as ThrottlerStorageRedisService }`: the same class
  for (const [alias, original] of aliases) {
    if (classes.has(original)) classes.set(alias, classes.get(original));
    else if (functions.has(original)) functions.set(alias, functions.get(original));
    else consts.add(alias);
  }
  return { classes, functions, consts };
}

/** The parameter names of a function's source (defaults and destructuring patterns left out). */
function runtimeParams(fn) {
  const text = Function.prototype.toString.call(fn);
  const m = /^[^(]*\(([^)]*)\)/.exec(text.replace(/\/\*[\s\S]*?\*\//g, ''));
  if (!m) return [];
  return m[1]
    .split(',')
    .map((p) => p.trim().replace(/=.*$/, '').replace(/^\.\.\./, '').trim())
    .filter(Boolean);
}

/** Whether a function is the package's own code (its source is under lib/), not a host library's. */
function ours(fn) {
  return !/\[native code\]/.test(Function.prototype.toString.call(fn));
}

function compareParams(what, declared, fn, { names = true } = {}) {
  const required = declared.filter((p) => p.required).length;
  if (!declared.some((p) => p.rest)) assert.equal(fn.length, required, `${what}: the code requires ${fn.length} parameters, index.d.ts ${required}`);
  if (names && ours(fn)) {
    const code = runtimeParams(fn);
    assert.deepEqual(
      declared.map((p) => p.name).slice(0, code.length),
      code.slice(0, declared.length),
      `${what}: parameter names in index.d.ts differ from the code`,
    );
  }
}

test('index.d.ts exports what the package exports', () => {
  const { classes, functions, consts } = declarations();
  const declared = new Set([...classes.keys(), ...functions.keys(), ...consts]);
  assert.deepEqual([...declared].sort(), Object.keys(pkg).sort());
});

test('every exported function declares the parameters the code has', () => {
  const { functions } = declarations();
  for (const [name, params] of functions) {
    assert.equal(typeof pkg[name], 'function', name);
    compareParams(name, params, pkg[name]);
  }
});

test('every exported class declares the methods the code has, with their parameters', () => {
  const { classes } = declarations();
  for (const [name, members] of classes) {
    const cls = pkg[name];
    assert.equal(typeof cls, 'function', name);
    const proto = cls.prototype;
    // the public methods the class itself defines (a host library's base class may add more)
    const own = Object.getOwnPropertyNames(proto).filter((k) => k !== 'constructor' && !k.startsWith('_') && typeof Object.getOwnPropertyDescriptor(proto, k).value === 'function');
    for (const k of members.methods.keys()) assert.equal(typeof proto[k], 'function', `${name}.${k} is declared but the code has no such method`);
    for (const k of own) assert.ok(members.methods.has(k), `${name}.${k} is in the code but not in index.d.ts`);
    // (a method inherited from a host library's class follows that library's API: only its presence is checked)
    for (const [k, params] of members.methods) if (own.includes(k)) compareParams(`${name}.${k}`, params, proto[k]);
    const statics = Object.getOwnPropertyNames(cls).filter((k) => typeof cls[k] === 'function' && !k.startsWith('_'));
    assert.deepEqual([...members.statics.keys()].sort(), statics.sort(), `${name}'s static methods`);
    if (members.ctor) compareParams(`new ${name}`, members.ctor, cls, { names: false });
  }
});

test('the check finds a drift', () => {
  // A method of the code that index.d.ts lacks, and a parameter it declares required that the
  // code takes as optional, are both found.
  const { RateLimit } = pkg;
  RateLimit.prototype.brandNew = function brandNew(key) {
    return key;
  };
  try {
    assert.throws(() => {
      const { classes } = declarations();
      const methods = Object.getOwnPropertyNames(RateLimit.prototype).filter((k) => k !== 'constructor' && !k.startsWith('_'));
      for (const k of methods) assert.ok(classes.get('RateLimit').methods.has(k), k);
    }, /brandNew/);
  } finally {
    delete RateLimit.prototype.brandNew;
  }
  assert.throws(() => compareParams('refund', [{ name: 'key', required: true }, { name: 'count', required: true }, { name: 'options', required: true }], RateLimit.prototype.refund));
});
