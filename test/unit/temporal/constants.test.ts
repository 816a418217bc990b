/**
 * Names every side agrees on: task queues, workflow ids and the custom search attributes.
 */
import { readFileSync } from 'node:fs';
import { SearchAttributeType } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { ORCHESTRATOR_TASK_QUEUE, poolTaskQueue, runWorkflowId, SA, SEARCH_ATTRIBUTE_FLAGS, stepWorkflowId } from '../../../src/temporal/constants.js';

describe('task queues', () => {
  it('has a fixed orchestrator queue and one queue per pool', () => {
    expect(ORCHESTRATOR_TASK_QUEUE).toBe('infir2-orchestrator');
    expect(poolTaskQueue('gpu')).toBe('infir2-gpu');
    expect(poolTaskQueue('h100-8x')).toBe('infir2-h100-8x');
  });
});

describe('workflow ids', () => {
  it('prefixes the run id with the recipe name', () => {
    expect(runWorkflowId('infir2-7b', '20251001-120000')).toBe('infir2-7b-20251001-120000');
  });

  it('does not prefix twice', () => {
    expect(runWorkflowId('tiny', 'tiny-r1')).toBe('tiny-r1');
    expect(runWorkflowId('tiny', 'tiny-')).toBe('tiny-');
  });

  it('prefixes a run id that merely starts with the recipe name', () => {
    expect(runWorkflowId('tiny', 'tinyr1')).toBe('tiny-tinyr1');
    expect(runWorkflowId('tiny', 'tiny')).toBe('tiny-tiny');
  });

  it('names a step workflow after its run workflow', () => {
    expect(stepWorkflowId('tiny-r1', 'cpt.stable')).toBe('tiny-r1/cpt.stable');
    expect(stepWorkflowId(runWorkflowId('infir2-7b', 'r2'), 'eval.aime24')).toBe('infir2-7b-r2/eval.aime24');
  });
});

describe('search attributes', () => {
  it('defines the four keys with their types; none is named RunId (Temporal reserves it)', () => {
    expect(SA.recipeName).toEqual({ name: 'RecipeName', type: SearchAttributeType.KEYWORD });
    expect(SA.stage).toEqual({ name: 'Stage', type: SearchAttributeType.KEYWORD_LIST });
    expect(SA.precision).toEqual({ name: 'TrainPrecision', type: SearchAttributeType.KEYWORD });
    expect(SA.runId).toEqual({ name: 'RecipeRunId', type: SearchAttributeType.KEYWORD });
    expect(Object.values(SA).map((k) => k.name)).not.toContain('RunId');
  });

  it('gives the Name=Type pairs for `temporal server start-dev --search-attribute`', () => {
    expect(SEARCH_ATTRIBUTE_FLAGS).toEqual(['RecipeName=Keyword', 'Stage=KeywordList', 'TrainPrecision=Keyword', 'RecipeRunId=Keyword']);
  });

  it('names only identifiers and the CLI type names', () => {
    for (const f of SEARCH_ATTRIBUTE_FLAGS) expect(f).toMatch(/^[A-Za-z_][A-Za-z0-9_]*=(Keyword|KeywordList)$/);
  });
});

describe('workflow safety', () => {
  it('imports only @temporalio/common (workflows import this file)', () => {
    const src = readFileSync(new URL('../../../src/temporal/constants.ts', import.meta.url), 'utf8');
    expect([...src.matchAll(/from '([^']+)'/g)].map((m) => m[1])).toEqual(['@temporalio/common']);
  });
});
