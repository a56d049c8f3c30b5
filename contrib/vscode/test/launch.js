// How the extension would start `evctl lsp`, read off the extension itself: extension.js is
// loaded with the two modules VS Code provides (`vscode`, `vscode-languageclient/node`)
// replaced by recorders, activated, and what it handed the language client is printed as
// JSON: the command, its arguments and options, and the client's options. The settings a
// user made come as JSON in argv[2] (`{"evctl.path": "…"}`); each setting the extension reads
// must be declared in package.json with the default the extension falls back to.
'use strict';

const Module = require('module');
const path = require('path');

const settings = JSON.parse(process.argv[2] || '{}');
const manifest = require(path.join(__dirname, '..', 'package.json'));
const declared = manifest.contributes.configuration.properties;
const problems = [];
let made;

const vscode = {
  workspace: {
    getConfiguration(section) {
      return {
        get(key, fallback) {
          const name = `${section}.${key}`;
          const d = declared[name];
          if (!d) {
            problems.push(`${name} is read but not declared in package.json`);
          } else if (JSON.stringify(d.default) !== JSON.stringify(fallback)) {
            problems.push(`${name}: package.json says ${JSON.stringify(d.default)}, the code falls back to ${JSON.stringify(fallback)}`);
          }
          return name in settings ? settings[name] : fallback;
        },
      };
    },
  },
};

class LanguageClient {
  constructor(id, name, serverOptions, clientOptions) {
    made = { id, name, serverOptions, clientOptions };
  }
  start() { return Promise.resolve(); }
  stop() { return Promise.resolve(); }
}

const load = Module._load;
Module._load = function (request, parent, isMain) {
  if (request === 'vscode') return vscode;
  if (request === 'vscode-languageclient/node') return { LanguageClient };
  return load.call(this, request, parent, isMain);
};

const extension = require(path.join(__dirname, '..', manifest.main));
Promise.resolve(extension.activate({ subscriptions: [] })).then(() => {
  if (!made) problems.push('activate() made no language client');
  const run = made ? made.serverOptions.run : {};
  process.stdout.write(JSON.stringify({
    problems,
    command: run.command,
    args: run.args || [],
    options: run.options || null,
    initializationOptions: made ? made.clientOptions.initializationOptions : null,
    documentSelector: made ? made.clientOptions.documentSelector : null,
  }) + '\n');
});
