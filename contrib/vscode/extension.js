// Starts `evctl lsp` for a workspace holding `.evolving/` and connects VS Code's language
// client to it. Everything else (diagnostics, hover, lenses, actions, commands) is the server's.
'use strict';

const vscode = require('vscode');
const { LanguageClient } = require('vscode-languageclient/node');

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration('evctl');
  const command = config.get('path', 'evctl');
  const serverOptions = {
    run: { command, args: ['lsp'] },
    debug: { command, args: ['lsp'] },
  };
  const clientOptions = {
    // The server decides which files decisions guard: give it every file on disk.
    documentSelector: [{ scheme: 'file' }],
    initializationOptions: {
      platform: config.get('platform', 'local'),
      testTimeoutSecs: config.get('testTimeoutSecs', 600),
    },
  };
  client = new LanguageClient('evctl', 'evctl', serverOptions, clientOptions);
  context.subscriptions.push({ dispose: () => client && client.stop() });
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
