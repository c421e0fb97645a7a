/** DESIGN.md "Plans": 0 no changes, 2 changes present, 1 error, 3 apply stopped part-way. */
export const EXIT = { ok: 0, error: 1, changes: 2, partial: 3 } as const;
