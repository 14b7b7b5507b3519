-- Why a paused session is paused: '' when a caller paused it (it stays
-- frozen until resumed), 'idle' when the idle sweep did (IDLE_ACTION=pause:
-- its next call thaws it, and it is removed after IDLE_PAUSED_TIMEOUT_S).
ALTER TABLE sessions ADD COLUMN pause_reason TEXT NOT NULL DEFAULT '';
