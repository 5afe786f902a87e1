% model.m: an image classifier whose positions attend to each other.
% numHeads, inputSize and solver are not defined here: give them (workspace=, --set).
numClasses = 10;
layers = [imageInputLayer(inputSize, Name="image")
          convolution2dLayer(3, 16, Padding="same", Stride=2)
          reluLayer
          imageToSequenceLayer(Name="positions")
          selfAttentionLayer(numHeads, 64)
          globalAveragePooling1dLayer
          fullyConnectedLayer(numClasses)
          softmaxLayer];
net = dlnetwork(layers);
options = trainingOptions(solver, MaxEpochs=5);
