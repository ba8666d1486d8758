import { type AlertRule } from './alerts.js';

// Until damper/otel lands: its characteristicAlerts.
export const SHIPPED_ALERTS: readonly AlertRule[] = [];
