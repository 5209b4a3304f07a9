/** @skein/acp */
export {}
