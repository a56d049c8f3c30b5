// Starts `evctl lsp` for a workspace holding `.evolving/` and connects VS Code's language
// client to it. Everything else (diagnostics, hover, lenses, actions, commands) is the server's.
'use strict';

const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

/** @type {import('vscode-languageclient/node').LanguageClient | undefined} */
let client;

/** @param {import('vscode').ExtensionContext} context */
function activate(context) {
  const config = vscode.workspace.getConfiguration('evctl');
  const command = config.get('path', 'evctl');
  /** @type {import('vscode-languageclient/node').ServerOptions} */
  const serverOptions = {
    run: { command, args: ['lsp'] },
    debug: { command, args: ['lsp'] },
  };
  /** @type {import('vscode-languageclient/node').LanguageClientOptions} */
  const clientOptions = {
    // The server decides which files decisions guard: give it every file on disk.
    documentSelector: [{ scheme: 'file' }],
    initializationOptions: {
      platform: config.get('platform', 'local'),
      testTimeoutSecs: config.get('testTimeoutSecs', 600),
    },
  };
  const started = new LanguageClient('evctl', 'evctl', serverOptions, clientOptions);
  client = started;
  context.subscriptions.push({ dispose: () => started.stop() });
  return started.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
