// Copyright 2026 The JAX fork authors.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     https://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

// Reads a source map with Mozilla's `source-map` library, for
// tests/source_mapper_test.py.
//
// stdin: JSON {"map": <source map object>, "queries": [[line, column], ...]}
//   with 1-based generated lines and 0-based columns, as the library takes.
// stdout: JSON {"positions": [originalPositionFor(query), ...],
//               "mappings": [every mapping, in generated order]}
"use strict";

const { SourceMapConsumer } = require("source-map");

async function main() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const result = await SourceMapConsumer.with(request.map, null, (consumer) => {
    const positions = (request.queries || []).map(([line, column]) =>
      consumer.originalPositionFor({ line, column }));
    const mappings = [];
    consumer.eachMapping((m) => {
      mappings.push({
        generatedLine: m.generatedLine,
        generatedColumn: m.generatedColumn,
        source: m.source,
        originalLine: m.originalLine,
        originalColumn: m.originalColumn,
      });
    }, null, SourceMapConsumer.GENERATED_ORDER);
    return { positions, mappings };
  });
  process.stdout.write(JSON.stringify(result));
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack || err) + "\n");
  process.exit(1);
});
