// The emulator as its own process during a benchmark, so the kms-sync side's CPU and RSS are its own.
// Forked by bench/run.js with an IPC channel: it answers `usage` requests with its CPU time, so the
// driver can report the emulator's share. Seeding and per-route counts go through the emulator's
// HTTP control routes (/__emulator/seed, /__emulator/counts), like any other client would use them.
import { startEmulator } from '../dist/emulator/index.js';

const opts = JSON.parse(process.argv[2] ?? '{}');
const emu = await startEmulator({ port: 0, apiKeys: [opts.apiKey], latencyMs: opts.latencyMs ?? 0, control: true });

process.on('message', (m) => {
  if (m?.type === 'usage') {
    const cpu = process.cpuUsage();
    process.send({
      type: 'usage',
      id: m.id,
      cpuMs: (cpu.user + cpu.system) / 1000,
      maxRssKB: process.resourceUsage().maxRSS,
    });
  } else if (m?.type === 'stop') {
    void emu.close().then(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
process.send({ type: 'ready', url: emu.url });
