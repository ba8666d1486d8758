#!/usr/bin/env node
// The `damper` command: the command line (command-line.ts) run by this process, its exit code the process's.
import { commandLine } from './command-line.js';

process.exitCode = await commandLine(process.argv.slice(2));
