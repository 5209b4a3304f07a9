/** @skein/canonical */
export {}
