/**
 * The failure converter of the workflow bundle that workers use when payloads are encrypted (INFIR2_CODEC_KEY):
 * a failure's message and stack trace travel in a payload, which the codec encrypts, instead of in the clear
 * (their text can hold paths and trainer output). Kept out of workflows/, whose files import only the workflow
 * API: the bundler and the worker load it by path (workers/workflow-bundle.ts). Readers need nothing: the SDK
 * decodes such failures always.
 */
import { DefaultFailureConverter } from '@temporalio/common';

export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
