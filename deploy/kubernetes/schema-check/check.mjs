#!/usr/bin/env node
// Validates Kubernetes objects (a JSON array on stdin, e.g. a rendered overlay) against the
// JSON schemas of kubernetes-models (core API) and @kubernetes-models/prometheus-operator
// (ServiceMonitor, PrometheusRule): unknown kinds, wrong types and missing required fields fail.
// Run by tests/e2e/dashboards/kubernetes.rs after `npm ci`.
import { readFileSync } from 'node:fs';

// apiVersion group -> module prefix.
function modulePath(apiVersion, kind) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  if (group === 'monitoring.coreos.com') {
    return `@kubernetes-models/prometheus-operator/${group}/${version}/${kind}`;
  }
  return `kubernetes-models/${group || ''}${group ? '/' : ''}${version}/${kind}`;
}

const objects = JSON.parse(readFileSync(0, 'utf8'));
const problems = [];
for (const obj of objects) {
  const what = `${obj.kind} ${obj.metadata?.name}`;
  let Model;
  try {
    Model = (await import(modulePath(obj.apiVersion, obj.kind)))[obj.kind];
  } catch (e) {
    problems.push(`${what}: no schema for ${obj.apiVersion} ${obj.kind} (${e.message})`);
    continue;
  }
  try {
    new Model(obj).validate();
    console.log(`ok ${what}`);
  } catch (e) {
    problems.push(`${what}: ${e.message}`);
  }
}
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
